"""Lifetime budgets sum a device's charges exactly and compare them with the budget without
tolerance, as the devices' own budgets do (tests/unit/device/test_device_budget.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import PrivacyError
from fedhh_coordinator.budgets import LifetimeBudget, RunAdmission
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

def test_a_run_a_billionth_over_the_lifetime_budget_is_refused() -> None:
    budget = LifetimeBudget(eps=1.0, delta=1e-5)
    budget.check_run(1.0, 1e-5)
    with pytest.raises(PrivacyError, match=r"a run of \(eps 1.0000000005, delta 1e-05\) exceeds"):
        budget.check_run(1.0000000005, 1e-5)
    with pytest.raises(PrivacyError, match="exceeds every device's lifetime budget"):
        budget.check_run(1.0, 1.000000001e-5)
