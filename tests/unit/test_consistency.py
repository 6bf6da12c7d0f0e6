"""Constrained inference over the tree (issue 15, ``consistency``; Hay et al. 2010): each
child's adjusted estimate is the least-squares solution under "the children add up to the
parent", and the tail bound the adjusted estimates are thresholded against dominates the law
of an adjusted zero-count estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedhh.codec import Codec
from fedhh.codec.automaton import DEAD
from fedhh.config import RunConfig
from fedhh.device.randomizer import RandomizedResponse
from fedhh.errors import ConfigError
from fedhh.server.consistency import MIN_CHILDREN, SPREAD_Z, ConsistentTail, adjust
from fedhh.server.estimate import BinomialTail, rr_null_std
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prefixtree import PrefixTree, TreeConfig
from fedhh.server.prune import prune_hh


def least_squares(parent: float, v_parent: float, children: np.ndarray, v: float) -> np.ndarray:
    """argmin (x_p - e_p)^2 / v_p + sum (x_c - e_c)^2 / v subject to x_p = sum x_c, solved as a
    linear system (the KKT conditions) rather than by the closed form."""
    m = children.size
    # Unknowns: x_p, x_1..x_m, lambda.
    a = np.zeros((m + 2, m + 2))
    b = np.zeros(m + 2)
    a[0, 0], a[0, m + 1], b[0] = 2 / v_parent, 1.0, 2 * parent / v_parent
    for i in range(m):
        a[1 + i, 1 + i], a[1 + i, m + 1], b[1 + i] = 2 / v, -1.0, 2 * children[i] / v
    a[m + 1, 0], a[m + 1, 1 : m + 1] = 1.0, -1.0
    return np.linalg.solve(a, b)[1 : m + 1]


def test_adjusted_children_are_the_constrained_least_squares_solution() -> None:
    rng = np.random.default_rng(1)
    s = 9  # 512 children per prefix
    estimates = rng.normal(0, 30, 3 << s)
    possible = np.ones(3 << s, dtype=bool)
    possible[rng.choice(512, 100, replace=False)] = False          # prefix 0: 412 possible
    possible[512 : 512 + 300] = False                               # prefix 1: 212 (too few)
    parents, v_parents, v = np.array([900.0, 400.0, -20.0]), np.array([800.0, 700.0, 900.0]), 900.0
    result = adjust(estimates, possible, s, parents, v_parents, v)
    for p in range(3):
        block = slice(p << s, (p + 1) << s)
        mask = possible[block]
        got = result.estimates[block]
        np.testing.assert_array_equal(got[~mask], estimates[block][~mask])  # impossible: as is
        if mask.sum() < MIN_CHILDREN:
            np.testing.assert_array_equal(got, estimates[block])  # too few children: w = 0
            continue
        expected = least_squares(parents[p], v_parents[p], estimates[block][mask], v)
        np.testing.assert_allclose(got[mask], expected, rtol=1e-9, atol=1e-9)
        # Consistent: the children add up to the adjusted parent e_p - v_p r / (v_p + m v).
        m, r = int(mask.sum()), parents[p] - estimates[block][mask].sum()
        parent = parents[p] - v_parents[p] * r / (v_parents[p] + m * v)
        assert got[mask].sum() == pytest.approx(parent, rel=1e-9)
    # The bound's parameters: the largest 1 - w (1, from the unadjusted prefix) and spread.
    assert result.shrink == 1.0
    possible_children = np.array([412, 212, 512])
    w = np.where(possible_children >= MIN_CHILDREN,
                 v / (v_parents + possible_children * v), 0.0)
    spreads = w * np.sqrt(v_parents + (possible_children - 1) * v)
    assert result.spread == pytest.approx(float(np.max(spreads)))


def exact_sf(base: BinomialTail, shrink: float, spread: float, x: float) -> float:
    """P((1 - w) X + W > x), X the exact zero-count law, W ~ N(0, spread^2) independent."""
    rr = base.rr
    k = np.arange(0, int(stats.binom.isf(1e-15, base.n, rr.a0)) + 2)
    pmf = stats.binom.pmf(k, base.n, rr.a0)
    values = (k - base.n * rr.a0) / (rr.a1 - rr.a0)
    return float(np.sum(pmf * stats.norm.sf((x - shrink * values) / spread)))


@pytest.mark.parametrize("shrink,spread", [(0.999, 0.05), (0.99, 0.3), (0.9, 2.0)])
def test_the_tail_bound_dominates_the_adjusted_zero_count_law(shrink: float, spread: float
                                                              ) -> None:
    base = BinomialTail(200_000, RandomizedResponse(8.0))
    bound = ConsistentTail(base, shrink, spread)
    sigma = base.sigma
    for x in np.linspace(0, 8 * sigma, 41):
        assert bound.sf(float(x)) >= exact_sf(base, shrink, spread, float(x)) * (1 - 1e-9)
    for p in (1e-2, 1e-4, 1e-7, 1e-9):
        x = bound.isf(p)
        assert bound.sf(x) <= p * (1 + 1e-12)
        assert exact_sf(base, shrink, spread, x) <= p
    assert bound.isf(0.5 * math.erfc(SPREAD_Z / math.sqrt(2.0))) == math.inf
    assert bound.sigma == pytest.approx(math.hypot(shrink * sigma, spread))


def test_the_bound_holds_at_its_own_threshold() -> None:
    """isf's threshold has a tail of at most p by the bound's own sf: the threshold maps back
    to the base's lattice point only up to rounding, and one point low counts the point
    (3 p each of 300 random bounds over random binomial laws)."""
    rng = np.random.default_rng(9)
    for _ in range(300):
        base = BinomialTail(int(rng.integers(100, 2_000_000)),
                            RandomizedResponse(float(rng.uniform(0.5, 8.0))))
        bound = ConsistentTail(base, float(rng.uniform(0.5, 1.0)), float(rng.uniform(0.0, 3.0)))
        for p in (0.3, 1e-3, 1e-7):
            assert bound.sf(bound.isf(p)) <= p


CODEC = Codec("5bit")
MECHANISM = LocalRandomizer(5.0, TailKind.BINOMIAL)
N = 50_000


def test_the_tree_thresholds_the_adjusted_estimates_against_the_bound() -> None:
    tree = PrefixTree(TreeConfig(rounds=4, dim_limit=2**16, consistency=True), CODEC, MECHANISM)
    rng = np.random.default_rng(2)
    rr = MECHANISM.randomizer
    state = tree.initial_state()
    query = tree.query(state)
    words = CODEC.encode_many(["there", "these", "thing", "think", "about", "above", "after"])
    counts = np.zeros(query.domain_size, dtype=np.int64)
    held = np.array([9000, 7000, 6000, 5000, 4000, 3000, 2000])
    counts[query.domain_index(words.codes)] = held
    sums = rng.binomial(N - counts, rr.a0) + rng.binomial(counts, rr.a1)
    state, report = tree.advance(state, sums, N)
    assert report.continuing > 0
    assert len(state.parent_estimates) == len(state.parent_variances) == len(state.prefixes)
    # Round 2, every device reporting the continuation of its round-1 element.
    query = tree.query(state)
    counts = np.zeros(query.domain_size, dtype=np.int64)
    index = query.domain_index(words.codes)
    counts[index[index >= 0]] = held[index >= 0]
    sums = rng.binomial(N - counts, rr.a0) + rng.binomial(counts, rr.a1)
    automaton = CODEC.automaton
    states = automaton.domain_states(automaton.run(query.prefixes, query.prefix_bits),
                                     query.segment_bits)
    possible = states != DEAD
    adjusted = adjust(MECHANISM.estimate(sums, N), possible, query.segment_bits,
                      np.array(state.parent_estimates), np.array(state.parent_variances),
                      rr_null_std(N, rr) ** 2)
    bound = ConsistentTail(MECHANISM.null_tail(N), adjusted.shrink, adjusted.spread)
    expected = prune_hh(adjusted.estimates[np.flatnonzero(possible)], bound, 0.5)
    _, second = tree.advance(state, sums, N)
    assert second.kept == expected.kept.size
    assert second.threshold == expected.threshold
    assert second.sigma == pytest.approx(bound.sigma)


@pytest.mark.parametrize("settings", [{}, {"single_item": True, "sampling_rate": 0.5},
                                      {"single_item": True, "algorithm": "triehh"}])
def test_consistency_needs_every_device_keeping_one_item(settings: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="consistency"):
        RunConfig(consistency=True, **settings).validate()  # type: ignore[arg-type]
    RunConfig(consistency=True, single_item=True).validate()
