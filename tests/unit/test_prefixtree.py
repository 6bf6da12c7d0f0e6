"""Round logic: domains within P, finished items moved, impossible and denied ones dropped,
state round trip, bad sums rejected."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.codec.automaton import DEAD
from fedhh.errors import ConfigError
from fedhh.server import PrefixTree, TreeConfig, TreeState
from fedhh.server.mechanisms import VoteThreshold

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
    # "a" then end then a non-zero padding bit, and "a" then the unused value 31: no honest
    # device can send them, so they never get kept, whatever their votes.
    a = CODEC.prefix(CODEC.encode("a"), 10)
    for bad in ((a << 10) | 1, (0b00000_11111 << 10) | 0b11010_00000):
        sums[bad] = 50
    state, report = tree.advance(state, sums, 10)
    assert report.denied == 1 and report.finished == 1 and report.kept == 2
    assert [h.item for h in tree.heavy_hitters(state)] == ["cd"]
    every = np.arange(query.domain_size, dtype=np.uint64)
    assert report.impossible == np.count_nonzero(CODEC.states(every, 20) == DEAD) > 0


def test_pruning_counts_only_the_possible_elements() -> None:
    """PruneHH's expected false positives are E x |candidates|, the impossible elements
    excluded."""
    from fedhh.server import LocalRandomizer, TailKind

    mechanism = LocalRandomizer(2.0, TailKind.BINOMIAL)
    tree = PrefixTree(TreeConfig(rounds=4, dim_limit=2**15), CODEC, mechanism)
    state = tree.initial_state()
    query = tree.query(state)
    rng = np.random.default_rng(7)
    n = 5000
    rr = mechanism.randomizer
    sums = rng.binomial(n, rr.a0, size=query.domain_size)
    state, report = tree.advance(state, sums, n)
    candidates = report.domain_size - report.impossible
    assert 0 < candidates < report.domain_size
    tail = mechanism.null_tail(n)
    assert report.expected_false_positives == pytest.approx(tail.sf(report.threshold) * candidates)


def test_items_wider_than_64_bits_are_found_exactly() -> None:
    codec = Codec("english", 200)
    items = {"https://www.example.com/a": 9, "https://www.example.com/b": 8,
             "https://www.example.org/": 7, "👍🏽": 6, "👍": 5, "ok": 5}
    tree = PrefixTree(TreeConfig(rounds=12, dim_limit=2**18), codec, VoteThreshold(5, 1.0))
    codes = codec.encode_many(list(items)).codes
    state = tree.initial_state()
    while not state.done:
        query = tree.query(state)
        assert query.prefixes.dtype == cw.code_dtype(query.prefix_bits)
        index = query.domain_index(codes)
        sums = np.zeros(query.domain_size, dtype=np.int64)
        np.add.at(sums, index[index >= 0], np.array(list(items.values()))[index >= 0])
        state, _ = tree.advance(state, sums, 40)
    found = {h.item: (h.estimate, h.ended, h.truncated) for h in tree.heavy_hitters(state)}
    assert found == {item: (float(count), True, False) for item, count in items.items()}
    assert TreeState.from_dict(state.to_dict()) == state


def test_truncated_items_with_the_same_text_are_one_row_that_says_why() -> None:
    """Issue 27: one row per shown text; the cut prefixes' estimates are summed."""
    codec = Codec("5bit", 13)  # two whole letters and 3 bits of the third symbol
    tree = PrefixTree(TreeConfig(rounds=1, dim_limit=2**13), codec, VoteThreshold(3, 1.0))
    state = tree.initial_state()
    query = tree.query(state)
    sums = np.zeros(query.domain_size, dtype=np.int64)
    abc, abq, a = (codec.encode(w) for w in ("abc", "abq", "a"))
    sums[abc] = sums[abq] = 5
    sums[a] = 4
    state, _ = tree.advance(state, sums, 10)
    hitters = tree.heavy_hitters(state)
    assert [(h.item, h.ended, h.truncated, h.estimate) for h in hitters] == [
        ("ab⟨+3 bits⟩…", False, True, 10.0), ("a", True, False, 4.0)]
    assert hitters[0].note.startswith("2 cut prefixes show this text")
    assert not hitters[1].note
    assert hitters[1].to_dict() == {"item": "a", "estimate": 4.0, "round": 1,
                                    "code": "0x00d0", "ended": True, "truncated": False}


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


@pytest.mark.parametrize("deny", [(), ("don't",)])
def test_another_writing_of_an_item_is_dropped(deny: tuple[str, ...]) -> None:
    """With tokens "don't" is one token or d, o, n't: a device sends only the first (the
    canonical writing), so only noise keeps the second. It is dropped: before, the list held
    "don't" twice (30, and 9 of noise), and a deny-listed "don't" through the second."""
    codec = Codec("unicode", 24)
    book = codec.book
    other = int((book.symbol_bits(b"d") + book.symbol_bits(b"o") + book.symbol_bits(b"n't")
                  + book.end).ljust(24, "0"), 2)
    canonical = int(codec.encode_many(["don't"]).codes[0])
    assert other != canonical and codec.decode(other, 24).text == "don't"
    tree = PrefixTree(TreeConfig(rounds=2, dim_limit=2**12), codec, VoteThreshold(5, 1.0),
                      deny_codes=codec.encode_many(list(deny)).codes)
    state = tree.initial_state()
    while not state.done:
        query = tree.query(state)
        index = query.domain_index(cw.from_ints([canonical, other], 24))
        sums = np.zeros(query.domain_size, dtype=np.int64)
        sums[index[index >= 0]] += np.array([30, 9])[index >= 0]
        state, _ = tree.advance(state, sums, 100)
    assert [(h.item, h.estimate) for h in tree.heavy_hitters(state)] == (
        [] if deny else [("don't", 30.0)])
