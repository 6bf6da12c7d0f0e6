"""Solver: inverse property, monotonicity grid, errors, speed, method flags."""

from __future__ import annotations

import time

import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy import aggregate_epsilon, solve_local_epsilon
from fedhh.privacy.solver import TOLERANCE

N = 200_000


@pytest.mark.parametrize(
    ("eps_agg", "rounds", "method"),
    [(1.0, 1, "exact"), (0.5, 4, "exact"), (1.0, 3, "paper"), (0.5, 2, "closed-form")],
)
def test_solve_then_check(eps_agg: float, rounds: int, method: str) -> None:
    sol = solve_local_epsilon(eps_agg, 1e-6, rounds, N, method=method)
    back = aggregate_epsilon(sol.eps_local, 1e-6, rounds, N, method=method)
    assert back.eps_agg <= eps_agg
    assert sol.eps_agg_achieved <= eps_agg
    assert back.eps_agg >= 0.97 * eps_agg  # within tolerance of the target
    above = aggregate_epsilon(sol.eps_local + 2 * TOLERANCE, 1e-6, rounds, N, method=method)
    assert above.eps_agg > eps_agg  # the largest feasible value, to the tolerance


def test_monotonicity_grid() -> None:
    def solve(eps_agg: float, rounds: int, n: int) -> float:
        return solve_local_epsilon(eps_agg, 1e-6, rounds, n).eps_local

    by_eps = [solve(e, 2, N) for e in (0.25, 0.5, 1.0)]
    by_n = [solve(0.5, 2, n) for n in (50_000, N, 800_000)]
    by_t = [solve(0.5, t, N) for t in (1, 2, 4)]
    assert by_eps == sorted(by_eps) and by_eps[0] < by_eps[-1]
    assert by_n == sorted(by_n) and by_n[0] < by_n[-1]
    assert by_t == sorted(by_t, reverse=True) and by_t[0] > by_t[-1]


def test_one_solve_is_fast_at_paper_scale() -> None:
    solve_local_epsilon(0.5, 1e-6, 2, 1_600_000)  # warm imports
    start = time.perf_counter()
    sol = solve_local_epsilon(1.0, 1e-6, 4, 1_600_000)
    assert time.perf_counter() - start < 2.0  # < 1 s on an idle core; slack for shared CI
    assert sol.eps_local == pytest.approx(8.467, abs=0.01)


def test_paper_method_is_flagged_and_larger() -> None:
    exact = solve_local_epsilon(1.0, 1e-6, 4, N)
    paper = solve_local_epsilon(1.0, 1e-6, 4, N, method="paper")
    assert exact.conditions_verified and not paper.conditions_verified
    assert paper.eps_local > exact.eps_local
    assert any("FMT23" in note for note in paper.notes)


def test_sampling_is_flagged() -> None:
    sol = solve_local_epsilon(1.0, 1e-6, 4, N, sampling_rate=0.5)
    assert not sol.conditions_verified
    assert sol.breakdown.participants == N // 2
    assert sol.breakdown.tightest == "rdp"
    assert aggregate_epsilon(sol.eps_local, 1e-6, 4, N, 0.5).eps_agg <= 1.0


def test_to_dict_is_json_ready() -> None:
    import json

    d = solve_local_epsilon(1.0, 1e-6, 1, N).to_dict()
    text = json.dumps(d)
    assert "eps_local" in d and "NaN" not in text and "Infinity" not in text


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"delta": 1.0}, "1.0"),
        ({"delta": 0.0}, "0.0"),
        ({"delta": -1e-6}, "-1e-06"),
        ({"eps_agg": 0.0}, "0.0"),
        ({"eps_agg": -1.0}, "-1.0"),
        ({"rounds": 0}, "0"),
        ({"num_devices": 1}, "1"),
        ({"sampling_rate": 0.0}, "0.0"),
        ({"sampling_rate": 1.5}, "1.5"),
        ({"method": "nope"}, "nope"),
    ],
)
def test_bad_inputs(kwargs: dict[str, object], fragment: str) -> None:
    args: dict[str, object] = {"eps_agg": 1.0, "delta": 1e-6, "rounds": 2, "num_devices": 1000}
    args.update(kwargs)
    with pytest.raises(PrivacyError, match=fragment.replace(".", r"\.")):
        solve_local_epsilon(**args)  # type: ignore[arg-type]
    assert issubclass(PrivacyError, ValueError)


def test_tiny_population_still_solves_or_explains() -> None:
    sol = solve_local_epsilon(1.0, 1e-6, 1, 2)
    assert sol.eps_local > 0
    assert sol.eps_agg_achieved <= 1.0
