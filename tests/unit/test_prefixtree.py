"""Round logic: domains within P, finished items moved, impossible and denied ones dropped,
state round trip, bad sums rejected."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.errors import ConfigError
from fedhh.mechanisms import VoteThreshold
from fedhh.prefixtree import PrefixTree, TreeConfig, TreeState

CODEC = Codec("5bit")


def votes_for(query, words: dict[str, int]) -> np.ndarray:
    codes = CODEC.encode_many(list(words)).codes
    index = query.domain_index(codes)
    sums = np.zeros(query.domain_size, dtype=np.int64)
    for i, count in zip(index.tolist(), words.values(), strict=True):
        if i >= 0:
            sums[i] += count
    return sums


def test_vote_tree_finds_words_of_every_length() -> None:
    tree = PrefixTree(TreeConfig(rounds=4, dim_limit=2**20), CODEC, VoteThreshold(5, 1.0))
    population = {"a": 9, "ab": 7, "abcdefgh": 6, "zzzzzzzzzzzzzzz": 8, "rare": 2}
    state = tree.initial_state()
    seen = []
    while not state.done:
        query = tree.query(state)
        assert query.domain_size <= 2**20
        state, report = tree.advance(state, votes_for(query, population), 40)
        seen.append(report)
    found = {h.item: h.estimate for h in tree.heavy_hitters(state)}
    assert found == {"a": 9.0, "ab": 7.0, "abcdefgh": 6.0, "zzzzzzzzzzzz…": 8.0}
    assert sum(r.segment_bits for r in seen) <= 60
    assert seen[0].segment_bits == 20


def test_deny_listed_and_impossible_elements_are_dropped() -> None:
    deny = CODEC.encode_many(["ab"]).codes
    tree = PrefixTree(TreeConfig(rounds=3, dim_limit=2**20), CODEC, VoteThreshold(1, 1.0), deny)
    state = tree.initial_state()
    query = tree.query(state)
    sums = votes_for(query, {"ab": 3, "cd": 4})
    # "a" then end then a non-zero padding bit: no honest device can send it.
    bad = (CODEC.prefix(CODEC.encode("a"), 10) << 10) | 1
    sums[bad] = 5
    state, report = tree.advance(state, sums, 10)
    assert report.denied == 1 and report.impossible == 1 and report.finished == 1
    assert [h.item for h in tree.heavy_hitters(state)] == ["cd"]


def test_state_round_trips_through_a_dict() -> None:
    tree = PrefixTree(TreeConfig(rounds=4, dim_limit=2**16), CODEC, VoteThreshold(2, 1.0))
    state = tree.initial_state()
    query = tree.query(state)
    state, _ = tree.advance(state, votes_for(query, {"hello": 3, "help": 3, "x": 5}), 11)
    assert TreeState.from_dict(state.to_dict()) == state
    assert not state.done and state.prefixes


def test_wrong_length_sum_is_rejected_and_changes_nothing() -> None:
    tree = PrefixTree(TreeConfig(rounds=4, dim_limit=2**16), CODEC, VoteThreshold(2, 1.0))
    state = tree.initial_state()
    with pytest.raises(ConfigError, match="shape"):
        tree.advance(state, np.zeros(7), 3)
    with pytest.raises(ConfigError, match="participants"):
        tree.advance(state, np.zeros(tree.query(state).domain_size), -1)
    assert state == tree.initial_state()


def test_finished_run_has_no_query() -> None:
    tree = PrefixTree(TreeConfig(rounds=4, dim_limit=2**16), CODEC, VoteThreshold(2, 1.0))
    state = tree.initial_state()
    state, _ = tree.advance(state, np.zeros(tree.query(state).domain_size), 0)
    assert state.done
    with pytest.raises(ConfigError):
        tree.query(state)
