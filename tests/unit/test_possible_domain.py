"""Counting only possible elements against the dimension limit (issue 15, ``domain``): the
counts of possible extensions are exact, a round's possible elements never exceed P (nor its
full grid 2P), and the planner carries at least as many prefixes as with the full grid."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.codec.automaton import DEAD
from fedhh.config import RunConfig
from fedhh.errors import ConfigError
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prefixtree import GRID_FACTOR, PrefixTree, TreeConfig
from fedhh.server.segment import PossibleCounts, plan_segment


@pytest.mark.parametrize("book", ["5bit", "english", "german"])
def test_counts_are_the_possible_extensions_by_enumeration(book: str) -> None:
    automaton = Codec.from_spec(book, 60).automaton
    counts = PossibleCounts(automaton.step, 60)
    rng = np.random.default_rng(0)
    states = [automaton.start, 1, 0, *rng.choice(automaton.num_states, 12).tolist()]
    for state in states:
        for bits in (0, 1, 5, 9, 13):
            brute = int(np.count_nonzero(automaton.extensions(int(state), bits) != DEAD))
            assert counts.table[bits][state] == brute, (book, state, bits)


def test_capacity_is_the_top_prefixes_whose_possible_extensions_fit() -> None:
    automaton = Codec.from_spec("english", 60).automaton
    counts = PossibleCounts(automaton.step, 60)
    rng = np.random.default_rng(1)
    states = rng.choice(np.arange(2, automaton.num_states), 5000)
    fits = counts.capacity(states, 10**6, 2 * 10**6)
    for bits in (6, 8, 10, 12, 14):
        total = np.cumsum(counts.table[bits][states])
        expected = min(int(np.sum(total <= 10**6)), (2 * 10**6) >> bits)
        assert fits(bits) == expected
    assert fits(61) == 0


CODEC = Codec.from_spec("english", 60)
MECHANISM = LocalRandomizer(8.0, TailKind.BINOMIAL)
N = 200_000


def run_round(domain: str, seed: int = 3):
    tree = PrefixTree(TreeConfig(rounds=4, domain=domain), CODEC, MECHANISM)
    state = tree.initial_state()
    query = tree.query(state)
    rng = np.random.default_rng(seed)
    words = ["the", "there", "their", "people", "thinking", "something", "anything",
             "everything", "beautiful", "government", "understand", "information"]
    words += [f"{a}{b}{c}ing" for a in "bcdfg" for b in "aeiou" for c in "lmnrst"]
    codes = CODEC.encode_many(words).codes
    counts = np.zeros(query.domain_size, dtype=np.int64)
    np.add.at(counts, query.domain_index(codes), rng.integers(400, 3000, len(words)))
    rr = MECHANISM.randomizer
    sums = rng.binomial(N - counts, rr.a0) + rng.binomial(counts, rr.a1)
    state, report = tree.advance(state, sums, N)
    return tree, query, state, report


def test_the_first_round_keeps_the_full_grid_segment() -> None:
    full = PrefixTree(TreeConfig(rounds=4), CODEC, MECHANISM).initial_state()
    possible = PrefixTree(TreeConfig(rounds=4, domain="possible"), CODEC, MECHANISM)
    assert possible.initial_state().segment_bits == full.segment_bits == 23
    # (Its possible elements would allow 25 bits: only a quarter of them are possible.)
    fits = possible.capacity(np.zeros(1, dtype=np.uint64), 0)
    assert fits is not None and fits(24) == 1 and fits(25) == 0  # 2^25 > the 2P grid


def test_every_later_round_keeps_its_possible_elements_within_p() -> None:
    _, _, full_state, _ = run_round("full")
    tree, _, state, report = run_round("possible")
    assert report.continuing > 0
    query = tree.query(state)
    automaton = CODEC.automaton
    states = automaton.domain_states(automaton.run(query.prefixes, query.prefix_bits),
                                     query.segment_bits)
    assert np.count_nonzero(states != DEAD) <= 10**7
    assert query.domain_size <= GRID_FACTOR * 10**7
    # Never fewer prefixes, nor shorter segments, than the full grid allows.
    assert len(state.prefixes) >= len(full_state.prefixes)


def test_the_domain_is_validated_and_simulation_only() -> None:
    with pytest.raises(ConfigError, match="domain"):
        TreeConfig(rounds=4, domain="compact").validate(60)
    with pytest.raises(ConfigError, match="domain"):
        RunConfig(domain="compact").validate()
    with pytest.raises(ConfigError, match="simulation-only"):
        from fedhh.config import Mode

        RunConfig(domain="possible").validate(Mode.NETWORK)


def test_plans_without_capacity_are_the_full_grid() -> None:
    for count in (1, 300, 2500, 9000):
        plain = plan_segment(count, 23, 3, 60, 10**7, plan="lookahead")
        def fits(bits: int, c: int = count) -> int:
            return min(c, 10**7 >> bits)

        assert plan_segment(count, 23, 3, 60, 10**7, plan="lookahead", capacity=fits) == plain


def test_the_counts_reach_as_far_as_a_grid_and_no_further() -> None:
    """A tree's counts stop at the longest segment a 2P grid holds for one prefix (past it no
    prefix fits whatever the counts), so its capacities are those of counts to the full width
    and a codec of more than 62 bits (completion rounds' long items) is planned alike (before,
    it was refused: 'possible-element counts are exact up to 62 bits')."""
    rng = np.random.default_rng(4)
    automaton = CODEC.automaton
    states = rng.choice(np.arange(2, automaton.num_states), 3000)
    for dim_limit in (10**4, 10**5, 10**7):
        tree = PrefixTree(TreeConfig(rounds=8, domain="possible", dim_limit=dim_limit), CODEC,
                          MECHANISM)
        assert tree.possible is not None
        assert tree.possible.table.shape[0] < 60
        capped = tree.possible.capacity(states, dim_limit, GRID_FACTOR * dim_limit)
        whole = PossibleCounts(automaton.step, 60).capacity(states, dim_limit,
                                                             GRID_FACTOR * dim_limit)
        assert [capped(b) for b in range(1, 61)] == [whole(b) for b in range(1, 61)]
    wide = Codec.from_spec("english", 828)
    long_tree = PrefixTree(TreeConfig(rounds=40, domain="possible"), wide, MECHANISM)
    query = long_tree.query(long_tree.initial_state())
    assert query.domain_size <= GRID_FACTOR * 10**7
