"""Planned segmentation (issue 15): the schedule is the best one by brute force, the planners
differ from the paper's greedy rule exactly where the greedy schedule trims later, and every
plan stays within the dimension limit and finishes the items in the rounds left."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.errors import ConfigError
from fedhh.server.segment import SEGMENT_PLANS, best_schedule, carried, floor_log2, plan_segment

P = 10**7


def brute_force(count: int, remaining: int, rounds: int, dim: int,
                masses: np.ndarray | None) -> tuple[int, ...]:
    """Every ascending schedule, the best by value and then the lexicographically largest."""
    cap = min(floor_log2(dim), remaining)
    total = None if masses is None else np.concatenate(([0.0], np.cumsum(masses)))

    def value(seg: int) -> float:
        kept = carried(count, seg, dim)
        return float(kept) if total is None else float(total[min(kept, total.size - 1)])

    best: tuple[float, tuple[int, ...]] | None = None
    for combo in itertools.combinations_with_replacement(range(1, cap + 1), rounds):
        if sum(combo) != remaining:
            continue
        key = (sum(value(s) for s in combo), combo)
        if best is None or key > best:
            best = key
    assert best is not None
    return best[1]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(count=st.integers(1, 40_000), remaining=st.integers(3, 40), rounds=st.integers(1, 4),
       dim_exp=st.integers(8, 16), weighted=st.booleans(), seed=st.integers(0, 10**6))
def test_best_schedule_is_the_brute_force_optimum(count, remaining, rounds, dim_exp, weighted,
                                                  seed):
    dim = 2**dim_exp + 77
    cap = min(floor_log2(dim), remaining)
    masses = None
    if weighted:
        masses = np.sort(np.random.default_rng(seed).pareto(1.2, count) * 40 + 40)[::-1]
    if not rounds <= remaining <= rounds * cap:
        with pytest.raises(ConfigError):
            best_schedule(count, remaining, rounds, dim, masses)
        return
    assert best_schedule(count, remaining, rounds, dim, masses) == \
        brute_force(count, remaining, rounds, dim, masses)


def test_the_greedy_trap_the_planners_avoid() -> None:
    # 2,500 prefixes at 23 bits, 37 bits in 3 rounds at P = 10^7: greedy takes 11, 11 and then
    # 15 bits (305 prefixes carried to the end); the plan trims 59 now and carries 1,220.
    greedy = plan_segment(2500, 23, 3, 60, P)
    assert (greedy.bits, greedy.keep_prefixes) == (11, 2500)
    assert best_schedule(2500, 37, 3, P) == (12, 12, 13)
    for plan in ("lookahead", "spread"):
        planned = plan_segment(2500, 23, 3, 60, P, plan=plan)
        assert (planned.bits, planned.keep_prefixes) == (12, 2441)


def test_masses_decide_where_to_trim() -> None:
    # 5,550 prefixes of equal worth: trimming once at the end loses the fewest (greedy's 10,
    # 10, 17); when the top prefixes hold most of the mass (Zipf 1.2), trimming the light ones
    # early carries far more mass (12, 12, 13).
    assert best_schedule(5550, 37, 3, P) == (10, 10, 17)
    flat = np.full(5550, 50.0)
    assert best_schedule(5550, 37, 3, P, flat) == (10, 10, 17)
    skewed = 1e6 / np.arange(1, 5551) ** 1.2
    assert best_schedule(5550, 37, 3, P, skewed) == (12, 12, 13)
    assert plan_segment(5550, 23, 3, 60, P, plan="lookahead", masses=skewed).bits == 12


def test_lookahead_keeps_greedy_when_greedy_trims_nothing_and_spread_uses_every_round() -> None:
    # 300 prefixes: greedy 15, 15, 7 trims nothing; spread takes the equal split.
    assert plan_segment(300, 23, 3, 60, P, plan="lookahead").bits == 15
    assert plan_segment(300, 23, 3, 60, P, plan="spread").bits == 12
    # 1 prefix left and 37 bits in 3 rounds: greedy finishes in 2 rounds, spread in 3.
    assert plan_segment(1, 23, 3, 60, P).bits == 23
    assert plan_segment(1, 23, 3, 60, P, plan="spread").bits == 12


def test_first_round_greedy_unless_rounds_are_plentiful() -> None:
    for plan in SEGMENT_PLANS:
        assert plan_segment(1, 0, 4, 60, P, plan=plan).bits == 23
    assert plan_segment(1, 0, 12, 60, P, plan="lookahead").bits == 23
    assert plan_segment(1, 0, 12, 60, P, plan="spread").bits == 5
    assert plan_segment(1, 0, 6, 60, P, plan="spread").bits == 10
    assert plan_segment(1, 0, 5, 60, P, plan="spread").bits == 23  # 12-bit rounds: 2,441 < sqrt P


@settings(max_examples=100, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(1, 200_000), min_size=12, max_size=12),
       rounds=st.integers(3, 12), dim_exp=st.integers(16, 24), plan=st.sampled_from(SEGMENT_PLANS))
def test_every_plan_finishes_within_the_rounds_and_the_limit(sizes, rounds, dim_exp, plan):
    dim = 2**dim_exp + 999
    if rounds * floor_log2(dim) < 60:
        return
    bits, count = 0, 1
    for t in range(rounds):
        masses = np.arange(count, 0, -1, dtype=float)
        step = plan_segment(count, bits, rounds - t, 60, dim, plan=plan, masses=masses)
        assert step.keep_prefixes * 2**step.bits <= dim
        assert 1 <= step.keep_prefixes <= count
        bits += step.bits
        if bits == 60:
            break
        count = sizes[t]
    assert bits == 60


def test_unknown_plan_is_refused() -> None:
    with pytest.raises(ConfigError, match="segment plan"):
        plan_segment(10, 0, 4, 60, P, plan="clever")
