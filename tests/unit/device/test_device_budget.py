"""A device's own budget: retried rounds get the same report, a changed query or a spent budget
gets none, spends age out of the period, and the record survives a restart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedhh.errors import PrivacyError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.budget import DeviceBudget


def task(round_: int = 1, attempt: int = 1, eps: float = 4.0, prefixes: tuple[int, ...] = (0,),
         run_id: str = "r") -> pb.Task:
    return pb.Task(run_id=run_id, round=round_, attempt=attempt, eps_local=eps,
                   prefixes=list(prefixes), segment_bits=4, max_bits=20, codec="5bit",
                   selection="uniform", prefix_conditioning=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def fresh(counter: list[int]) -> np.ndarray:
    counter.append(1)
    return np.array([len(counter), 100 + len(counter)])


def test_every_attempt_of_a_round_gets_the_first_report(tmp_path: Path) -> None:
    budget = DeviceBudget.load(tmp_path / "b.json", cap=10, period_s=100)
    calls: list[int] = []
    first = budget.report(task(attempt=1), lambda: fresh(calls))
    again = budget.report(task(attempt=2), lambda: fresh(calls))
    assert np.array_equal(first, again) and len(calls) == 1
    assert budget.spent() == 4.0  # one spend for the round, not one per attempt
    reloaded = DeviceBudget.load(tmp_path / "b.json", cap=10, period_s=100)
    assert np.array_equal(reloaded.report(task(attempt=3), lambda: fresh(calls)), first)
    assert len(calls) == 1


def test_a_round_whose_query_changed_is_refused() -> None:
    budget = DeviceBudget.load(None, cap=10, period_s=100)
    budget.report(task(prefixes=(0,)), lambda: np.array([1]))
    with pytest.raises(PrivacyError, match="another query"):
        budget.report(task(attempt=2, prefixes=(1,)), lambda: np.array([2]))
    with pytest.raises(PrivacyError, match="another query"):
        budget.report(task(attempt=2, eps=5.0), lambda: np.array([2]))


def test_the_budget_caps_the_sum_over_the_period() -> None:
    clock = Clock()
    budget = DeviceBudget.load(None, cap=10, period_s=100)
    budget.clock = clock
    budget.report(task(round_=1), lambda: np.array([1]))
    budget.report(task(round_=2), lambda: np.array([1]))
    with pytest.raises(PrivacyError, match="budget is spent"):
        budget.report(task(round_=3), lambda: np.array([1]))
    clock.now += 101  # both spends left the period
    budget.report(task(round_=3), lambda: np.array([1]))
    assert budget.spent() == 4.0


def test_a_corrupt_record_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text("{nope")
    with pytest.raises(Exception, match="corrupt"):
        DeviceBudget.load(path, cap=10, period_s=100)
