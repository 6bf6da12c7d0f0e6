"""Data selection: each rule's distribution, deny list and prefix conditioning respected.

Distribution tests draw for many identical users at once (one vectorized call) and apply a
chi-square goodness-of-fit test at significance 1e-7, so a correct implementation fails with
probability at most 1e-7 per test (the seeds are fixed, so the outcome is also reproducible).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedhh.codec import Codec
from fedhh.device.selection import (
    NOTHING,
    Eligibility,
    RoundFilter,
    Selection,
    SelectionRule,
    select_block,
)

ALPHA = 1e-7
CODEC = Codec("5bit")
WORDS = ["apple", "apricot", "banana", "berry", "cherry"]
CODES = CODEC.encode_many(WORDS).codes


def prefix_of(word: str, bits: int) -> int:
    return CODEC.prefix(CODEC.encode(word), bits)


def make_filter(prefix_words: list[str], bits: int, deny: list[str] = ()) -> RoundFilter:
    prefixes = np.unique(np.array([prefix_of(w, bits) for w in prefix_words], dtype=np.uint64))
    deny_codes = np.unique(CODEC.encode_many(list(deny)).codes) if deny else np.zeros(0, np.uint64)
    return RoundFilter(prefixes, bits, deny_codes, CODEC.max_bits)


def eligible(rf: RoundFilter) -> Eligibility:
    return Eligibility.of(CODES, rf)


def replicate(users: int, items: list[int], counts: list[int]):
    indptr = np.arange(users + 1, dtype=np.int64) * len(items)
    return indptr, np.tile(np.array(items, np.int32), users), np.tile(np.array(counts), users)


def chi_square_ok(observed: np.ndarray, probabilities: np.ndarray) -> bool:
    expected = probabilities * observed.sum()
    mask = probabilities > 0
    assert observed[~mask].sum() == 0, "an impossible outcome was drawn"
    return stats.chisquare(observed[mask], expected[mask]).pvalue > ALPHA


@pytest.mark.parametrize("rule", list(SelectionRule))
def test_rule_distribution_without_filtering(rule: SelectionRule) -> None:
    counts = [5, 1, 3, 1, 10]
    indptr, items, cnt = replicate(200_000, [0, 1, 2, 3, 4], counts)
    rf = make_filter(WORDS, 0)
    rng = np.random.default_rng(1)
    chosen = select_block(indptr, items, cnt, eligible(rf), Selection(rule), rng)
    picked = items[chosen]
    observed = np.bincount(picked, minlength=5)
    weights = np.array(counts, float) if rule is SelectionRule.WEIGHTED else np.ones(5)
    assert chi_square_ok(observed, weights / weights.sum())


@pytest.mark.parametrize("rule", list(SelectionRule))
def test_prefix_conditioning_and_deny_list(rule: SelectionRule) -> None:
    counts = [5, 1, 3, 1, 10]
    indptr, items, cnt = replicate(100_000, [0, 1, 2, 3, 4], counts)
    # Prefix list {"a", "b"} (5 bits), deny "banana": eligible apple, apricot, berry.
    rf = make_filter(["apple", "berry"], 5, deny=["banana"])
    rng = np.random.default_rng(2)
    chosen = select_block(indptr, items, cnt, eligible(rf), Selection(rule), rng)
    assert np.all(chosen >= 0)
    observed = np.bincount(items[chosen], minlength=5)
    allowed = np.array([1, 1, 0, 1, 0], float)
    weights = allowed * (np.array(counts) if rule is SelectionRule.WEIGHTED else 1)
    assert chi_square_ok(observed, weights / weights.sum())


@pytest.mark.parametrize("rule", list(SelectionRule))
def test_without_conditioning_off_list_items_report_nothing(rule: SelectionRule) -> None:
    counts = [5, 1, 3, 1, 10]
    indptr, items, cnt = replicate(100_000, [0, 1, 2, 3, 4], counts)
    rf = make_filter(["apple"], 5, deny=["banana"])  # list {"a"}: apple, apricot
    selection = Selection(rule, prefix_conditioning=False)
    chosen = select_block(indptr, items, cnt, eligible(rf), selection, np.random.default_rng(3))
    outcomes = np.where(chosen >= 0, items[np.maximum(chosen, 0)], 5)  # 5 = nothing
    observed = np.bincount(outcomes, minlength=6)
    weights = np.array([1, 1, 0, 1, 1], float)  # banana denied, never drawn
    if rule is SelectionRule.WEIGHTED:
        weights *= counts
    p = weights / weights.sum()
    expected = np.array([p[0], p[1], 0, 0, 0, p[3] + p[4]])  # berry/cherry drawn, off the list
    assert chi_square_ok(observed, expected)


def test_no_eligible_item_means_nothing() -> None:
    indptr = np.array([0, 2, 2, 3])  # user 1 holds nothing
    items = np.array([2, 3, 4], np.int32)
    cnt = np.array([1, 1, 1])
    rf = make_filter(["apple"], 5)
    chosen = select_block(indptr, items, cnt, eligible(rf), Selection(), np.random.default_rng(0))
    assert chosen.tolist() == [NOTHING, NOTHING, NOTHING]


def test_same_seed_same_selection() -> None:
    indptr, items, cnt = replicate(1000, [0, 1, 2, 3, 4], [1, 2, 3, 4, 5])
    rf = make_filter(WORDS, 0)
    runs = [select_block(indptr, items, cnt, eligible(rf), Selection(SelectionRule.WEIGHTED),
                         np.random.default_rng(9)) for _ in range(2)]
    assert np.array_equal(runs[0], runs[1])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=st.data())
def test_the_draw_over_allowed_entries_only_is_the_same_draw(data) -> None:
    """A short prefix list makes few entries allowed; the draw then runs over those alone
    (``SPARSE_SHARE``) and must pick exactly the entries the draw over every entry picks."""
    from fedhh.device import selection

    lengths = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=30))
    indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    n = int(indptr[-1])
    counts = np.array(data.draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)),
                      dtype=np.int64)
    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    seed = data.draw(st.integers(0, 2**31))
    for rule in (SelectionRule.UNIFORM, SelectionRule.WEIGHTED):
        picks = []
        for share in (-1.0, 2.0):  # every entry, then the allowed ones only
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(selection, "SPARSE_SHARE", share)
                picks.append(selection._sample(indptr, counts, allowed, rule,
                                               np.random.default_rng(seed)))
        assert np.array_equal(picks[0], picks[1])
