"""The selection hint (issue 15, ``selection_hint``): with prefix conditioning a device draws
each eligible item with probability proportional to its prefix's weight (times its count under
the weighted rule); the weights are the previous round's estimates to the power -hint and
travel with the round's prefix list. Distribution tests use a chi-square test at significance
1e-7 (a correct implementation fails with probability at most 1e-7; seeds are fixed)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedhh.codec import Codec
from fedhh.device.selection import (
    WEIGHT_SCALE,
    Eligibility,
    RoundFilter,
    Selection,
    SelectionRule,
    select_block,
)
from fedhh.errors import ConfigError
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prefixtree import PrefixTree, TreeConfig

ALPHA = 1e-7
CODEC = Codec("5bit")
WORDS = ["apple", "apricot", "banana", "berry", "cherry"]
CODES = CODEC.encode_many(WORDS).codes
COUNTS = [5, 1, 3, 1, 10]


def weighted_filter(weights: dict[str, float]) -> RoundFilter:
    """Prefix list of the words' first letters (5 bits) with a weight per letter."""
    letters = sorted(weights)
    prefixes = np.array([CODEC.prefix(CODEC.encode(w), 5) for w in letters], dtype=np.uint64)
    order = np.argsort(prefixes)
    return RoundFilter(prefixes[order], 5, np.zeros(0, np.uint64), CODEC.max_bits,
                       np.array([weights[letters[i]] for i in order]))


def draw(rule: SelectionRule, rf: RoundFilter, conditioned: bool = True, seed: int = 1
         ) -> np.ndarray:
    users = 200_000
    indptr = np.arange(users + 1, dtype=np.int64) * len(WORDS)
    items = np.tile(np.arange(len(WORDS), dtype=np.int32), users)
    counts = np.tile(np.array(COUNTS), users)
    chosen = select_block(indptr, items, counts, Eligibility.of(CODES, rf),
                          Selection(rule, conditioned), np.random.default_rng(seed))
    return np.where(chosen >= 0, items[np.maximum(chosen, 0)], len(WORDS))


def fits(outcomes: np.ndarray, probabilities: list[float]) -> bool:
    p = np.array(probabilities, dtype=np.float64)
    p /= p.sum()
    observed = np.bincount(outcomes, minlength=p.size)
    assert observed[p == 0].sum() == 0, "an impossible outcome was drawn"
    return stats.chisquare(observed[p > 0], p[p > 0] * observed.sum()).pvalue > ALPHA


@pytest.mark.parametrize("rule", list(SelectionRule))
def test_items_are_drawn_in_proportion_to_their_prefix_weight(rule: SelectionRule) -> None:
    rf = weighted_filter({"a": 1.0, "b": 0.25})  # "c" is off the list
    per_item = np.array([1.0, 1.0, 0.25, 0.25, 0.0])
    if rule is SelectionRule.WEIGHTED:
        per_item *= COUNTS
    assert fits(draw(rule, rf), [*per_item.tolist(), 0.0])


def test_the_paper_rule_is_the_hint_with_equal_weights() -> None:
    rf = weighted_filter({"a": 0.3, "b": 0.3, "c": 0.3})
    assert fits(draw(SelectionRule.UNIFORM, rf), [1, 1, 1, 1, 1, 0])


def test_an_unconditioned_draw_ignores_the_weights() -> None:
    rf = weighted_filter({"a": 1.0, "b": 0.01})
    # Drawn among all items uniformly; cherry's prefix is off the list: nothing reported.
    assert fits(draw(SelectionRule.UNIFORM, rf, conditioned=False), [1, 1, 1, 1, 0, 1])


def test_weights_are_integers_and_never_zero_on_the_list() -> None:
    rf = weighted_filter({"a": 1.0, "b": 1e-9})
    weight = Eligibility.of(CODES, rf).weight
    assert weight is not None
    assert weight.tolist() == [WEIGHT_SCALE, WEIGHT_SCALE, 1, 1, 0]


@pytest.mark.parametrize("bad", [[1.0], [1.0, 0.0], [1.0, -2.0], [1.0, np.nan], [1.0, np.inf]])
def test_bad_prefix_weights_are_refused(bad: list[float]) -> None:
    rf = weighted_filter({"a": 1.0, "b": 1.0})
    rf = RoundFilter(rf.prefixes, rf.prefix_bits, rf.deny, rf.max_bits, np.array(bad))
    with pytest.raises(ConfigError, match="prefix weights"):
        Eligibility.of(CODES, rf)


MECHANISM = LocalRandomizer(4.0, TailKind.BINOMIAL)
N = 30_000


def test_the_tree_sends_each_prefix_its_estimate_to_the_power_minus_hint() -> None:
    tree = PrefixTree(TreeConfig(rounds=4, dim_limit=2**16, selection_hint=0.5), CODEC, MECHANISM)
    state = tree.initial_state()
    query = tree.query(state)
    assert query.prefix_weights is None  # round 1 has one (empty) prefix
    counts = np.zeros(query.domain_size, dtype=np.int64)
    words = CODEC.encode_many(["there", "these", "thing", "about", "above", "zebra"])
    counts[query.domain_index(words.codes)] = [4000, 2500, 1500, 900, 700, 600]
    rng = np.random.default_rng(6)
    rr = MECHANISM.randomizer
    sums = rng.binomial(N - counts, rr.a0) + rng.binomial(counts, rr.a1)
    estimates = MECHANISM.estimate(sums, N)
    state, report = tree.advance(state, sums, N)
    assert report.continuing > 0
    # Round 1's domain index of a prefix is its value: its estimate is estimates[prefix].
    expected = [max(float(estimates[p]), 1.0) ** -0.5 for p in state.prefixes]
    np.testing.assert_allclose(state.hints, expected, rtol=1e-12)
    np.testing.assert_allclose(tree.query(state).prefix_weights, expected, rtol=1e-12)
    plain = PrefixTree(TreeConfig(rounds=4, dim_limit=2**16), CODEC, MECHANISM)
    plain_state, _ = plain.advance(plain.initial_state(), sums, N)
    assert plain.query(plain_state).prefix_weights is None


@pytest.mark.parametrize("hint", [-0.1, 4.5])
def test_the_hint_is_bounded(hint: float) -> None:
    with pytest.raises(ConfigError, match="selection_hint"):
        PrefixTree(TreeConfig(rounds=4, selection_hint=hint), CODEC, MECHANISM)
