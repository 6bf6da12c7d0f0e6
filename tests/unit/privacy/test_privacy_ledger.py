"""The privacy ledger: recording, refusals, dry runs, JSON round trip."""

from __future__ import annotations

import json

import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy import PrivacyLedger

N_MIN = 50_000


@pytest.fixture(scope="module")
def ledger() -> PrivacyLedger:
    return PrivacyLedger.open(1.0, 1e-6, 3, N_MIN)


def test_open_solves_and_fits(ledger: PrivacyLedger) -> None:
    assert ledger.eps_local > 1.0
    assert ledger.projected_epsilon() <= 1.0
    assert ledger.spent_epsilon() == 0.0


def test_record_returns_new_value(ledger: PrivacyLedger) -> None:
    after = ledger.record(0, N_MIN)
    assert ledger.rounds_recorded == 0 and after.rounds_recorded == 1
    assert 0 < after.spent_epsilon() < after.projected_epsilon() <= 1.0
    more = after.record(1, 4 * N_MIN)  # more contributors: spends no more than planned
    assert more.projected_epsilon() <= after.projected_epsilon() + 1e-12


def test_refusals_name_the_figures(ledger: PrivacyLedger) -> None:
    after = ledger.record(0, N_MIN)
    with pytest.raises(PrivacyError, match="already recorded"):
        after.record(0, N_MIN)
    with pytest.raises(PrivacyError, match=r"outside the declared rounds 0\.\.2"):
        after.record(3, N_MIN)
    with pytest.raises(PrivacyError, match=r"round 1 with 5000 contributors \(n_min=50000\)"):
        after.record(1, 5_000)


def test_check_is_a_dry_run(ledger: PrivacyLedger) -> None:
    result = ledger.check(0, N_MIN // 20)
    assert not result.accepted and result.projected_epsilon > 1.0
    ok = ledger.check(0, N_MIN)
    assert ok.accepted and ok.spend is not None
    assert ledger.rounds_recorded == 0


def test_all_rounds_then_no_more(ledger: PrivacyLedger) -> None:
    full = ledger.record(0, N_MIN).record(1, N_MIN).record(2, N_MIN)
    assert full.spent_epsilon() <= 1.0
    with pytest.raises(PrivacyError):
        full.record(2, N_MIN)


def test_json_round_trip(ledger: PrivacyLedger) -> None:
    after = ledger.record(1, 2 * N_MIN)
    restored = PrivacyLedger.from_dict(json.loads(json.dumps(after.to_dict())))
    assert restored == after
    assert restored.spent_epsilon() == after.spent_epsilon()


def test_bad_declarations() -> None:
    with pytest.raises(PrivacyError, match="delta"):
        PrivacyLedger.open(1.0, 1.5, 3, N_MIN)
    with pytest.raises(PrivacyError, match="plan exceeds"):
        PrivacyLedger.open(1.0, 1e-6, 3, N_MIN, eps_local=12.0)
    with pytest.raises(PrivacyError, match="malformed"):
        PrivacyLedger.from_dict({"eps_agg": 1.0})
