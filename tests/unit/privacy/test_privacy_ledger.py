"""The privacy ledger: recording, retries, refusals, dry runs, JSON round trip, old versions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy.stats import binom

from fedhh.errors import PrivacyError
from fedhh.privacy import PrivacyLedger, basic_composition
from fedhh.privacy.accountant import participants_for

N_MIN = 50_000


@pytest.fixture(scope="module")
def ledger() -> PrivacyLedger:
    return PrivacyLedger.open(1.0, 1e-6, 3, N_MIN)


def test_open_solves_and_fits(ledger: PrivacyLedger) -> None:
    """The solved local epsilon is the largest whose plan fits: 1% more does not."""
    assert ledger.projected_epsilon() <= 1.0
    assert ledger.spent_epsilon() == 0.0
    with pytest.raises(PrivacyError, match="exceeds the budget"):
        PrivacyLedger.open(1.0, 1e-6, 3, N_MIN, eps_local=ledger.eps_local * 1.01)


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


# ---- charge on unmask: retries, projections, persistence -----------------------------------
def test_a_lost_attempt_is_charged_and_the_retry_charges_the_report_alone() -> None:
    """The retry of a round re-sends the same report, so the round is charged as that report
    released alone in place of its two charges (issue 28; the figures are checked against an
    independent computation in test_privacy_retries.py)."""
    roomy = PrivacyLedger.open(40.0, 1e-6, 3, N_MIN, eps_local=4.0)
    first = roomy.record(0, N_MIN, attempt=1)
    retried = first.record(0, N_MIN, attempt=2)  # the sum of attempt 1 was lost
    assert retried.rounds_recorded == 1 and retried.charges == 2
    alone = PrivacyLedger.open(40.0, 1e-6, 1, N_MIN, eps_local=4.0)
    report = alone.record(0, N_MIN, attempt=1).record(0, N_MIN, attempt=2)
    assert retried.spent_epsilon() == pytest.approx(report.spent_epsilon(), rel=1e-12)
    # more than two fresh rounds, at most the report's own epsilon; a third attempt adds nothing
    two = roomy.record(0, N_MIN).record(1, N_MIN)
    assert two.spent_epsilon() < retried.spent_epsilon() <= 4.0
    third = retried.record(0, N_MIN, attempt=3)
    assert third.spent_epsilon() == pytest.approx(retried.spent_epsilon(), rel=1e-12)
    # the projection: the report and the 2 rounds not yet charged
    assert retried.projected_epsilon() > roomy.projected_epsilon()


def test_retries_need_increasing_attempt_numbers(ledger: PrivacyLedger) -> None:
    charged = ledger.record(0, N_MIN, attempt=3)
    with pytest.raises(PrivacyError, match="already recorded"):
        charged.record(0, N_MIN)
    with pytest.raises(PrivacyError, match="already charged for attempt 3; attempt 3"):
        charged.record(0, N_MIN, attempt=3)
    with pytest.raises(PrivacyError, match="attempt 2 must be larger"):
        charged.record(0, N_MIN, attempt=2)
    unnumbered = ledger.record(0, N_MIN)
    with pytest.raises(PrivacyError, match="an unnumbered attempt"):
        unnumbered.record(0, N_MIN, attempt=5)
    with pytest.raises(PrivacyError, match="attempt must be an integer"):
        ledger.record(0, N_MIN, attempt=-1)


def test_retries_are_refused_once_the_budget_is_spent() -> None:
    tight = PrivacyLedger.open(1.0, 1e-6, 2, N_MIN)
    one = tight.record(0, N_MIN, attempt=0)
    with pytest.raises(PrivacyError, match=r"round 0 \(attempt 1, a retry: its report, sent "
                       r"again, is charged as released alone\) with 50000"):
        one.record(0, N_MIN, attempt=1)
    check = one.check(0, N_MIN, attempt=1)
    assert not check.accepted and check.projected_epsilon > 1.0


def test_version_1_ledgers_still_load() -> None:
    fixture = json.loads((Path(__file__).parent / "data" / "ledger_v1.json").read_text())
    old = PrivacyLedger.from_dict(fixture["unsampled"])
    assert old.method == "clones" and old.rounds_recorded == 2
    assert all(s.attempt is None for s in old.spends)
    assert old.spent_epsilon() == pytest.approx(fixture["spent"][0], rel=1e-12)
    newer = old.record(2, 50_000)
    assert newer.projected_epsilon() <= 1.0
    assert PrivacyLedger.from_dict(newer.to_dict()) == newer
    sampled = PrivacyLedger.from_dict(fixture["sampled"])
    assert sampled.population == 40_000 and sampled.n_min == 20_000
    assert sampled.spent_epsilon() == pytest.approx(fixture["spent"][1], rel=1e-12)
    assert sampled.record(1, 20_000).spent_epsilon() > sampled.spent_epsilon()


def test_unknown_versions_and_bad_dicts_are_refused(ledger: PrivacyLedger) -> None:
    data = ledger.record(0, N_MIN).to_dict()
    with pytest.raises(PrivacyError, match="version 3 is not readable"):
        PrivacyLedger.from_dict({**data, "version": 3})
    broken = {**data, "spends": [{"round_index": "x"}]}
    with pytest.raises(PrivacyError, match="malformed ledger"):
        PrivacyLedger.from_dict(broken)
    with pytest.raises(PrivacyError, match="malformed ledger"):
        PrivacyLedger.from_dict({**data, "method": "bogus"})
    with pytest.raises(PrivacyError, match="malformed ledger"):
        PrivacyLedger.from_dict([1, 2])  # type: ignore[arg-type]


def test_sampled_ledger_charges_the_real_participant_count() -> None:
    sampled = PrivacyLedger.open(1.0, 1e-6, 3, 20_000, sampling_rate=0.5)
    assert sampled.population == 40_000
    fewer = sampled.record(0, 19_000)  # below the expected count: charged as it was
    assert fewer.spent_epsilon() > 0
    with pytest.raises(PrivacyError, match="more than the 40000 devices"):
        sampled.record(0, 40_001)


def test_a_sampled_plan_covers_every_likely_participant_count() -> None:
    """A sampled round is charged at its real count m ~ Bin(N, q), and under the sum accountant
    its loss grows with m: the plan is solved at the count a round exceeds with probability at
    most 1e-9, so rounds that drew many participants (here 4.5 sd above the mean) still fit."""
    sampled = PrivacyLedger.open(1.0, 1e-6, 3, 20_000, sampling_rate=0.5)
    assert binom.sf(sampled.n_min, 40_000, 0.5) <= 1e-9 < binom.sf(sampled.n_min - 1, 40_000, 0.5)
    ledger = sampled
    for round_index in range(3):
        ledger = ledger.record(round_index, 20_450)
    assert ledger.spent_epsilon() <= 1.0 + 1e-9
    assert sampled.check(0, sampled.n_min + 1).projected_epsilon > \
        sampled.check(0, 20_000).projected_epsilon


def test_shuffle_methods_still_work_as_named_methods() -> None:
    shuffled = PrivacyLedger.open(20.0, 1e-6, 3, N_MIN, method="clones", eps_local=4.0)
    once = shuffled.record(0, N_MIN, attempt=0)
    after = once.record(0, N_MIN, attempt=1)  # a retry: the report alone, at most eps_local
    assert once.spent_epsilon() < after.spent_epsilon() <= 4.0
    assert after.rounds_recorded == 1 and after.spent_epsilon() < after.projected_epsilon() <= 20
    assert PrivacyLedger.from_dict(json.loads(json.dumps(after.to_dict()))) == after


def test_basic_composition_for_lifetime_budgets() -> None:
    assert basic_composition([]) == (0.0, 0.0)
    eps, delta = basic_composition([(1.0, 1e-6), (0.5, 2e-6), (0.25, 0.0)])
    assert eps == pytest.approx(1.75) and delta == pytest.approx(3e-6)
    with pytest.raises(PrivacyError, match="guarantee 1: eps must be finite"):
        basic_composition([(1.0, 1e-6), (math.inf, 0.0)])
    with pytest.raises(PrivacyError, match="guarantee 0: delta must be in"):
        basic_composition([(1.0, 2.0)])
    with pytest.raises(PrivacyError, match="an \\(eps, delta\\) pair"):
        basic_composition([(1.0,)])  # type: ignore[list-item]
    with pytest.raises(PrivacyError, match="composed delta"):
        basic_composition([(1.0, 0.6), (1.0, 0.6)])


def test_a_sampling_rate_that_leaves_rounds_without_two_contributors_is_refused() -> None:
    """Before: sampling_rate 1e-20 over 1,387 devices was a TypeError from scipy's binomial,
    1e-5 "contributors must be an integer >= 1, got 0", 1e-3 a refusal at round 0 that did
    not say why. A mean below 2 contributors a round is refused at once, naming the rate."""
    for rate, mean in ((1e-20, "1.39e-17"), (1e-5, "0.0139"), (1e-3, "1.39")):
        with pytest.raises(PrivacyError, match=f"sampling_rate {rate:g} over 1,387 devices "
                           f"gives rounds of {mean} contributors on average; a round needs "
                           "at least 2"):
            participants_for(1_387, rate)
    assert participants_for(1_387, 0.01) >= 2


def test_a_stored_spend_outside_the_declared_rounds_is_refused(ledger: PrivacyLedger) -> None:
    # (it loaded; an allocated ledger then raised IndexError when composing, one without offsets
    # charged a round the run does not have)
    data = ledger.record(0, N_MIN).to_dict()
    data["spends"][0]["round_index"] = ledger.rounds
    with pytest.raises(PrivacyError, match=r"malformed ledger: spend 0 is of round 3, outside "
                                            r"the declared rounds 0\.\.2"):
        PrivacyLedger.from_dict(data)
    data["spends"][0]["round_index"] = ledger.rounds - 1
    assert PrivacyLedger.from_dict(data).rounds_recorded == 1


def test_a_sampled_run_is_charged_as_a_sample_of_its_real_population() -> None:
    # 1,387 devices at q = 0.5: n_min = round(693.5) = 694, and ceil(694 / 0.5) = 1,388 was the
    # ledger's population, one device more than the run had, so each round's sampling
    # probability m / N was charged below the real m / 1,387. The simulation passes N now.
    from fedhh.config import RunConfig
    from fedhh.simulation.runner import prepare

    ledger = prepare(RunConfig(eps_local=3.0, sampling_rate=0.5, rounds=4, completion_rounds=0),
                     1387).ledger
    assert ledger is not None and ledger.population == 1387
    derived = PrivacyLedger.open(1e3, 1e-6, 4, 694, sampling_rate=0.5, eps_local=3.0)
    given = PrivacyLedger.open(1e3, 1e-6, 4, 694, sampling_rate=0.5, eps_local=3.0,
                               population=1387)
    assert (derived.population, given.population) == (1388, 1387)
    assert given.record(0, 705).spent_epsilon() > derived.record(0, 705).spent_epsilon()
    with pytest.raises(PrivacyError, match="population 1387 of a run without sampling"):
        PrivacyLedger.open(1e3, 1e-6, 4, 694, eps_local=3.0, population=1387)
