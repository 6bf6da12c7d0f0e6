"""Thresholds weighted by what the previous round proved (issue 15, ``threshold_weights``):
PruneHH's weighted rule keeps element i exactly when its null tail probability is at most
E w_i, so its expected false positives keep the unweighted bound; the evidence of a kept
prefix is a non-decreasing probability; the tree weighs each child by its parent's evidence."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.codec.automaton import DEAD
from fedhh.errors import ConfigError
from fedhh.server.estimate import GaussianTail
from fedhh.server.evidence import GROUP, LEVELS, real_probability, weight_levels
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prefixtree import PrefixTree, TreeConfig
from fedhh.server.prune import prune_hh

TAIL = GaussianTail(10.0)


def noisy_domain(seed: int, size: int = 20_000, real: int = 300) -> np.ndarray:
    """Zero-count estimates (the null law) plus a few real elements of assorted sizes."""
    rng = np.random.default_rng(seed)
    estimates = rng.normal(0.0, TAIL.sigma, size)
    estimates[rng.choice(size, real, replace=False)] += rng.uniform(10, 80, real)
    return estimates


@pytest.mark.parametrize("seed", range(4))
def test_equal_weights_are_the_paper_rule(seed: int) -> None:
    estimates = noisy_domain(seed)
    plain = prune_hh(estimates, TAIL, 0.3)
    weighted = prune_hh(estimates, TAIL, 0.3, weights=np.full(estimates.size, 7.0))
    np.testing.assert_array_equal(weighted.kept, plain.kept)
    assert weighted.threshold == pytest.approx(plain.threshold, rel=1e-12)
    assert weighted.expected_false_positives == pytest.approx(plain.expected_false_positives,
                                                              rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_each_element_is_kept_against_its_own_share_of_the_budget(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    estimates = noisy_domain(seed)
    weights = rng.choice([1 / 32, 0.25, 1.0, 3.0], estimates.size)
    result = prune_hh(estimates, TAIL, 0.4, weights=weights)
    assert result.kept.size > 0
    # The weight-1 threshold is returned: E is its tail probability.
    e = TAIL.sf(result.threshold)
    scaled = weights * estimates.size / weights.sum()
    # Four weights, so four thresholds: each computed once rather than once per element.
    shares, element_share = np.unique(scaled, return_inverse=True)
    thresholds = np.array([TAIL.isf(min(e * w, 1.0)) if e * w < 1 else -np.inf
                           for w in shares])[element_share]
    np.testing.assert_array_equal(result.kept, np.flatnonzero(estimates > thresholds))
    # Heavier weights never get a higher threshold.
    order = np.argsort(scaled)
    assert np.all(np.diff(thresholds[order]) <= 1e-9)
    # The bound the loop stops at: expected false positives at most gamma times the kept.
    tails = np.array([TAIL.sf(t) for t in np.unique(thresholds)])
    expected = float(tails @ np.unique(thresholds, return_counts=True)[1])
    assert result.expected_false_positives == pytest.approx(expected, rel=1e-9)
    assert result.expected_false_positives <= 0.4 * result.kept.size * (1 + 1e-12)
    assert result.expected_false_positives <= e * estimates.size * (1 + 1e-12)


def test_zero_weight_is_never_kept_and_bad_weights_are_refused() -> None:
    estimates = noisy_domain(9)
    weights = np.ones(estimates.size)
    top = int(np.argmax(estimates))
    weights[top] = 0.0
    assert top not in prune_hh(estimates, TAIL, 0.5, weights=weights).kept
    for bad, message in ((np.ones(3), "weights for"), (-weights, "non-negative"),
                         (np.full(estimates.size, np.nan), "finite")):
        with pytest.raises(ConfigError, match=message):
            prune_hh(estimates, TAIL, 0.5, weights=bad)
    with pytest.raises(ConfigError, match="every element"):
        prune_hh(estimates, TAIL, 0.5, domain_size=10 * estimates.size, weights=weights)
    nothing = prune_hh(estimates, TAIL, 0.5, weights=np.zeros(estimates.size))
    assert nothing.kept.size == 0


def test_evidence_is_a_non_decreasing_probability() -> None:
    rng = np.random.default_rng(4)
    lower = TAIL.isf(1e-3)
    kept = np.sort(np.concatenate([lower + rng.exponential(5, 400), lower + 60 + rng.normal(0, 5,
                                                                                            200)]))
    p = real_probability(kept[::-1].copy(), TAIL, 10**6, lower)[::-1]  # any input order
    assert np.all((p >= 0) & (p <= 1))
    assert np.all(np.diff(p) >= 0)
    assert p[-1] == pytest.approx(1.0, abs=1e-12)  # 6 sigma above: surely real
    assert p[0] == 0.0  # just above a threshold over a million null elements: the rate caps at 1


def test_evidence_of_one_window_is_its_local_false_discovery_rate() -> None:
    lower = 30.0
    kept = np.linspace(31.0, 40.0, GROUP)
    domain = 1000
    rate = domain * (TAIL.sf(lower) - TAIL.sf(40.0)) / GROUP
    p = real_probability(kept, TAIL, domain, lower)
    np.testing.assert_allclose(p, 1.0 - rate, rtol=1e-12)
    assert real_probability(np.zeros(0), TAIL, domain, lower).size == 0


def test_weight_levels_are_a_coarse_grid_never_zero() -> None:
    p = np.array([0.0, 1e-9, 0.02, 0.5, 0.51, 1.0])
    levels = weight_levels(p)
    assert np.all(levels >= 1 / LEVELS) and np.all(levels <= 1)
    np.testing.assert_array_equal(levels * LEVELS, np.round(levels * LEVELS))
    np.testing.assert_array_equal(levels, [1 / 32, 1 / 32, 1 / 32, 0.5, 0.5, 1.0])


CODEC = Codec("5bit")
MECHANISM = LocalRandomizer(4.0, TailKind.BINOMIAL)
N = 30_000


def test_the_tree_weighs_children_by_their_parents_evidence() -> None:
    config = TreeConfig(rounds=4, dim_limit=2**16, threshold_weights="parent")
    tree = PrefixTree(config, CODEC, MECHANISM)
    rng = np.random.default_rng(8)
    rr = MECHANISM.randomizer
    state = tree.initial_state()
    query = tree.query(state)
    counts = np.zeros(query.domain_size, dtype=np.int64)
    words = CODEC.encode_many(["there", "these", "thing", "think", "about", "above", "zebra"])
    index = query.domain_index(words.codes)
    counts[index] = [3000, 2500, 2000, 900, 800, 700, 600]
    sums = rng.binomial(N - counts, rr.a0) + rng.binomial(counts, rr.a1)
    state, report = tree.advance(state, sums, N)
    assert report.continuing > 0
    assert len(state.evidence) == len(state.prefixes) == report.continuing
    assert all(0 <= p <= 1 for p in state.evidence)
    # Round 2: the same threshold rule with each child weighed by its parent's evidence level.
    query = tree.query(state)
    sums = rng.binomial(N, rr.a0, size=query.domain_size)
    automaton = CODEC.automaton
    states = automaton.domain_states(automaton.run(query.prefixes, query.prefix_bits),
                                     query.segment_bits)
    possible = np.flatnonzero(states != DEAD)
    weights = np.repeat(weight_levels(np.array(state.evidence)), 1 << query.segment_bits)
    expected = prune_hh(MECHANISM.estimate(sums, N)[possible], MECHANISM.null_tail(N),
                        config.fp_ratio, weights=weights[possible])
    _, second = tree.advance(state, sums, N)
    assert second.kept == expected.kept.size
    assert second.threshold == expected.threshold


def test_vote_thresholds_cannot_be_weighted() -> None:
    from fedhh.server.mechanisms import VoteThreshold

    with pytest.raises(ConfigError, match="noise law"):
        PrefixTree(TreeConfig(rounds=4, threshold_weights="parent"), CODEC,
                   VoteThreshold(10, 0.5))
    with pytest.raises(ConfigError, match="threshold_weights"):
        PrefixTree(TreeConfig(rounds=4, threshold_weights="evidence"), CODEC, MECHANISM)


def test_equal_estimates_share_one_window() -> None:
    """Under the exact lattice law many kept estimates are equal: their lattice point's null
    mass is shared by all of them, never credited to the first GROUP alone."""
    from fedhh.device.randomizer import RandomizedResponse
    from fedhh.server.estimate import BinomialTail

    tail = BinomialTail(1_000_000, RandomizedResponse(10.0))
    lower = tail.isf(1e-4)
    lattice = (tail.rr.a1 - tail.rr.a0)
    low, high = lower + 1 / lattice, lower + 40 / lattice  # one and 40 reports above
    kept = np.concatenate([np.full(7 * GROUP, low), np.full(3, high)])
    domain = 10**6
    p = real_probability(kept, tail, domain, lower)
    rate = min(1.0, domain * (tail.sf(lower) - tail.sf(low)) / (7 * GROUP))
    np.testing.assert_allclose(p[: 7 * GROUP], 1 - rate, rtol=1e-9)
    assert rate > 0.1  # a real share of them is noise, and all of them say so
    assert np.all(p[7 * GROUP :] >= p[0])
