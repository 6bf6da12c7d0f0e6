"""The run's local epsilon is solved no higher than its ``max_eps_local``.

A target far above what any round can spend (eps_agg 1e300, valid) climbed the solver to its
own ceiling of 40 (eight evaluations of the accountant, each dearer the larger eps_local:
~20 s of a coordinator's StartRun) for a run held at ``max_eps_local`` (10) anyway.
"""

from __future__ import annotations

from typing import Any

import pytest

from fedhh.config import Mode, RunConfig, with_most_completions
from fedhh.privacy import solver
from fedhh_coordinator.runs import open_ledger


def counted(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    seen: list[float] = []
    evaluate = solver.aggregate_epsilon

    def counting(eps_local: float, *args: Any, **kwargs: Any) -> Any:
        seen.append(eps_local)
        return evaluate(eps_local, *args, **kwargs)

    monkeypatch.setattr(solver, "aggregate_epsilon", counting)
    return seen


@pytest.mark.parametrize("completions", [0, 2])
def test_a_target_the_cap_meets_is_solved_at_the_cap_in_one_evaluation(
        monkeypatch: pytest.MonkeyPatch, completions: int) -> None:
    seen = counted(monkeypatch)
    config = RunConfig(eps_agg=1e300, target_devices=400, min_devices=300,
                       completion_rounds=completions)
    config.validate(Mode.NETWORK)
    _, ledger = with_most_completions(config, open_ledger, lambda ledger: ledger.eps_local)
    assert ledger.eps_local == config.max_eps_local == 10
    assert seen == [10]


def test_a_target_below_the_cap_is_solved_as_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    capped = solver.solve_local_epsilon(1.0, 1e-6, 4, 300, cap=10)
    assert capped.eps_local < 10
    assert capped == solver.solve_local_epsilon(1.0, 1e-6, 4, 300)
    seen = counted(monkeypatch)
    assert solver.solve_local_epsilon(1.0, 1e-6, 4, 300, cap=capped.eps_local / 2).eps_local \
        == capped.eps_local / 2
    assert seen == [capped.eps_local / 2]
