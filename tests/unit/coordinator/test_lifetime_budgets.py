"""Lifetime budgets sum a device's charges exactly and compare them with the budget without
tolerance, as the devices' own budgets do (tests/unit/device/test_device_budget.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh.errors import PrivacyError
from fedhh.privacy.ledger import PrivacyLedger
from fedhh.rounds import RoundDriver, RunCancelled
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget, RunAdmission, settle_run_charge
from fedhh_coordinator.dashboard.pages import budgets_page
from fedhh_coordinator.dashboard.views import BudgetView
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import CANCEL_ASKED, Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


def test_ten_runs_of_a_tenth_exceed_a_lifetime_eps_of_one(tmp_path: Path) -> None:
    # (before, SQL's SUM of nine 0.1 charges, 0.8999999999999999, was compared with
    # 1.0 * (1 + 1e-9) - 0.1, and the tenth run admitted the device)
    store = Store(tmp_path / "c.sqlite")
    tenths, quarters, fresh = (store.add_device(b"c" * 32, bytes([k]) * 32, "")
                               for k in range(3))
    for run in range(10):
        store.create_run(f"r{run}", {}, 1.0, {}, {}, [])
    for run in range(9):
        store.charge_devices(f"r{run}", [tenths], 0.1, 1e-7)
    for run in range(3):  # 0.75: the fourth 0.25 reaches the budget exactly
        store.charge_devices(f"r{run}", [quarters], 0.25, 1e-7)
    budget = LifetimeBudget(eps=1.0, delta=1e-5)
    tenth = RunAdmission(store, budget, "r9", 0.1, 1e-7)
    assert tenth.refused == {tenths}
    assert tenth.eligible(quarters) and tenth.eligible(fresh)
    assert RunAdmission(store, budget, "r9", 0.25, 1e-7).refused == {tenths}
    assert RunAdmission(store, budget, "r9", 0.2500000001, 1e-7).refused == {tenths, quarters}
    # the deltas as well: nine charges of 0.05 and a run of 0.05 exceed a delta of 0.5 (exactly
    # 0.5000000000000000277; in floats 0.49999999999999994)
    for run in range(9):
        store.charge_devices(f"r{run}", [fresh], 0.0, 0.05)
    deltas = LifetimeBudget(eps=10.0, delta=0.5)
    assert RunAdmission(store, deltas, "r9", 0.1, 0.05).refused == {fresh}
    assert RunAdmission(store, deltas, "r9", 0.1, 0.04).refused == set()

def test_a_shortfall_that_only_the_exact_sum_shows_says_so_in_figures(tmp_path: Path) -> None:
    # (before, the check-in's abort said "each may spend eps 1": nine runs of 0.1 and this
    # one's 0.1, 1 in floats, left the operator guessing why the device was refused)
    store = Store(tmp_path / "c.sqlite")
    tenths, whole = (store.add_device(b"c" * 32, bytes([k]) * 32, "") for k in range(2))
    for run in range(10):
        store.create_run(f"r{run}", {}, 1.0, {}, {}, [])
    for run in range(9):
        store.charge_devices(f"r{run}", [tenths], 0.1, 1e-7)
    store.charge_devices("r0", [whole], 2.0, 1e-7)
    admission = RunAdmission(store, LifetimeBudget(eps=1.0, delta=1e-5), "r9", 0.1, 1e-7)
    assert admission.refused == {tenths, whole}
    assert admission.shortfall().endswith(
        f"; device {tenths}'s 9 charges and this run's are compared exactly, eps: their exact "
        "sum, 1.000000000000000055511151231257827..., is above the cap 1.0 by 5.551e-17 (a "
        "charge is the binary value of its double: 0.1 is "
        "0.1000000000000000055511151231257827...)")
    plain = RunAdmission(store, LifetimeBudget(eps=1.0, delta=1e-5), "r9", 0.5, 1e-7)
    assert plain.refused == {tenths, whole} and "exact" not in plain.shortfall()


def test_a_shortfall_writes_the_budget_as_the_exact_words_do(tmp_path: Path) -> None:
    # (before, "each may spend eps 1" beside "above the cap 1.0", and a run of eps 0.30000001
    # read "eps 0.3": the figures were :g, the exact comparison's repr)
    store = Store(tmp_path / "c.sqlite")
    tenths = store.add_device(b"c" * 32, b"t" * 32, "")
    for run in range(10):
        store.create_run(f"r{run}", {}, 1.0, {}, {}, [])
    for run in range(9):
        store.charge_devices(f"r{run}", [tenths], 0.1, 1e-7)
    said = RunAdmission(store, LifetimeBudget(eps=1.0, delta=1e-5), "r9", 0.1, 1e-7).shortfall()
    assert "(eps 0.1, delta 1e-07): each may spend eps 1.0, delta 1e-05 per 30 days" in said
    assert "is above the cap 1.0 by" in said
    odd = RunAdmission(store, LifetimeBudget(eps=1.0, delta=1e-5), "r9", 0.30000001, 1e-7)
    assert "this run's (eps 0.30000001, delta 1e-07)" in odd.shortfall()


def test_a_run_a_billionth_over_the_lifetime_budget_is_refused() -> None:
    budget = LifetimeBudget(eps=1.0, delta=1e-5)
    budget.check_run(1.0, 1e-5)
    with pytest.raises(PrivacyError, match=r"a run of \(eps 1.0000000005, delta 1e-05\) exceeds"):
        budget.check_run(1.0000000005, 1e-5)
    with pytest.raises(PrivacyError, match="exceeds every device's lifetime budget"):
        budget.check_run(1.0, 1.000000001e-5)


def ledgers() -> tuple[PrivacyLedger, PrivacyLedger]:
    """A two-round ledger at its target with both rounds charged at n_min (1,000), and the same
    with its second round charged by force at 3 contributors: spent above its target."""
    def open_at(target: float) -> PrivacyLedger:  # (closed-form: composed in milliseconds)
        return PrivacyLedger.open(target, 1e-6, 2, 1000, eps_local=0.5, method="closed-form")

    first = open_at(open_at(100.0).projected_epsilon()).record(0, 1000)
    with pytest.raises(PrivacyError):
        first.record(1, 3)
    return first.record(1, 1000), first.record(1, 3, force=True)


def test_a_run_that_ended_over_its_target_charges_its_devices_what_it_spent(
        tmp_path: Path) -> None:
    # (before, its devices stayed charged the target, below the ledger's spend)
    store = Store(tmp_path / "c.sqlite")
    device = store.add_device(b"c" * 32, b"k" * 32, "")
    for run in ("over", "within"):
        store.create_run(run, {}, 1.0, {}, {}, [])
    within, over = ledgers()
    store.charge_devices("over", [device], over.eps_agg, 1e-6)
    store.charge_devices("within", [device], within.eps_agg, 1e-6)
    assert not within.overspent and settle_run_charge(store, "within", within) is None
    assert settle_run_charge(store, "within", None) is None
    spent = settle_run_charge(store, "over", over)
    assert spent is not None and spent == over.spent_epsilon() > over.eps_agg
    assert sorted(store.device_spend_terms(0.0)[device]) == [(over.eps_agg, 1e-6, 1),
                                                             (spent, 1e-6, 1)]


def cancelled_overspent_run(store: Store) -> tuple[Runner, PrivacyLedger, int]:
    """A runner, and a run "t" stored over its target (a forced charge) whose cancellation
    was asked, one device charged its target: driving it stops it with RunCancelled."""
    device = store.add_device(b"c" * 32, b"k" * 32, "")
    config = RunConfig(eps_agg=1.0, delta=1e-6, rounds=1, max_bits=10, dim_limit=1 << 10,
                       target_devices=200, min_devices=150, completion_rounds=0)
    row = asyncio.run(create_run(store, config, "plan"))  # (its ledger solved in ~2 s)
    over = PrivacyLedger.from_dict(row.ledger).record(0, 2, force=True)
    assert over.overspent
    store.create_run("t", row.config, row.eps_local, row.tree, over.to_dict(), row.deny_codes)
    store.charge_devices("t", [device], 1.0, 1e-6)
    store.set_run_state("t", "running")
    assert store.ask_cancel("t", CANCEL_ASKED)
    runner = Runner(store, None, Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                    DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                    LifetimeBudget(eps=1e9, delta=0.5))
    return runner, over, device


def test_the_runner_settles_the_charge_of_a_run_however_it_ends(tmp_path: Path) -> None:
    """A run stored over its target, cancelled when driven again: its devices are charged what
    its ledger spent as it stops."""
    store = Store(tmp_path / "c.sqlite")
    runner, over, device = cancelled_overspent_run(store)
    with pytest.raises(RunCancelled):
        asyncio.run(asyncio.wait_for(runner.drive("t"), 60))
    assert store.device_spend_terms(0.0) == {device: [(over.spent_epsilon(), 1e-6, 1)]}


def test_a_settlement_the_store_refuses_keeps_why_the_run_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # (before, the store's error raised in the settlement replaced the cancellation, and the
    # operator's log said only that the store was unavailable)
    store = Store(tmp_path / "c.sqlite")
    runner, _, _ = cancelled_overspent_run(store)

    def unavailable(run_id: str, eps: float) -> int:
        raise StoreUnavailable("database connection lost")

    monkeypatch.setattr(store, "raise_run_charge", unavailable)
    with pytest.raises(StoreUnavailable) as raised:
        asyncio.run(asyncio.wait_for(runner.drive("t"), 60))
    assert isinstance(raised.value.__cause__, RunCancelled)
    settled = [r for r in caplog.records if r.getMessage().startswith("the run stopped")]
    assert len(settled) == 1
    assert settled[0].stopped_by.startswith("RunCancelled: ")  # type: ignore[attr-defined]
    assert "database connection lost" in settled[0].error  # type: ignore[attr-defined]


def test_a_settlement_the_store_refuses_does_not_stop_a_cancelled_task_stopping(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (before, the store's error replaced the task's cancellation: the service, stopping,
    # waited for the store instead)
    store = Store(tmp_path / "c.sqlite")
    runner, _, _ = cancelled_overspent_run(store)

    async def stopping(self: RoundDriver, state: object) -> None:
        raise asyncio.CancelledError

    def unavailable(run_id: str, eps: float) -> int:
        raise StoreUnavailable("database connection lost")

    monkeypatch.setattr(RoundDriver, "run", stopping)
    monkeypatch.setattr(store, "raise_run_charge", unavailable)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(runner.drive("t"))


def test_the_budgets_page_says_charges_are_added_exactly() -> None:
    # (before, it said nothing of it, nor of an overspent run's charge: a device at nine runs
    # of 0.1 under a budget of 1 showed room for a tenth the coordinator refuses)
    page = str(budgets_page(BudgetView(1.0, 1e-5, 30.0, 3, 1, 0, (0, 0, 0, 1, 0), ())))
    assert "or what the run spent where it ended above its target" in page
    assert ("0.1 is 0.1000000000000000055…, so ten runs of 0.1 are above a budget of 1 and the "
            "tenth is refused") in page
