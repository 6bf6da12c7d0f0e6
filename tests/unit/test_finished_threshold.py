"""A false-positive target of its own for the elements that finish an item (issue 15): the two
classes are thresholded separately by PruneHH, each against its own target and the same null
law, and the last round's elements all finish."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.codec.automaton import DEAD, ENDED
from fedhh.errors import ConfigError
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prefixtree import PrefixTree, TreeConfig
from fedhh.server.prune import prune_hh

CODEC = Codec("5bit")
MECHANISM = LocalRandomizer(3.0, TailKind.BINOMIAL)
N = 20_000


def round_one(config: TreeConfig, seed: int = 3):
    tree = PrefixTree(config, CODEC, MECHANISM)
    state = tree.initial_state()
    query = tree.query(state)
    rng = np.random.default_rng(seed)
    rr = MECHANISM.randomizer
    counts = np.zeros(query.domain_size, dtype=np.int64)
    words = CODEC.encode_many(["a", "to", "the", "and", "tree", "zebra", "quiet", "xylophone"])
    index = query.domain_index(words.codes)
    counts[index[index >= 0]] = [900, 700, 500, 400, 300, 250, 200, 150][: int(np.sum(index >= 0))]
    sums = rng.binomial(N - counts, rr.a0) + rng.binomial(counts, rr.a1)
    return tree, state, query, sums


def test_classes_are_thresholded_on_their_own() -> None:
    config = TreeConfig(rounds=4, dim_limit=2**16, fp_ratio=0.5, fp_ratio_finished=0.1)
    tree, state, query, sums = round_one(config)
    states = CODEC.automaton.domain_states(CODEC.automaton.run(query.prefixes, 0),
                                           query.segment_bits)
    estimates = MECHANISM.estimate(sums, N)
    tail = MECHANISM.null_tail(N)
    ends = np.flatnonzero(states == ENDED)
    others = np.flatnonzero((states != DEAD) & (states != ENDED))
    expected_end = prune_hh(estimates[ends], tail, 0.1)
    expected_other = prune_hh(estimates[others], tail, 0.5)
    _, report = tree.advance(state, sums, N)
    assert report.finished_threshold == expected_end.threshold
    assert report.threshold == expected_other.threshold
    assert report.kept == expected_end.kept.size + expected_other.kept.size
    assert report.expected_false_positives == pytest.approx(
        expected_end.expected_false_positives + expected_other.expected_false_positives)
    assert report.finished == expected_end.kept.size  # nothing denied


def test_single_target_is_unchanged_by_default() -> None:
    tree, state, query, sums = round_one(TreeConfig(rounds=4, dim_limit=2**16))
    states = CODEC.automaton.domain_states(CODEC.automaton.run(query.prefixes, 0),
                                           query.segment_bits)
    possible = np.flatnonzero(states != DEAD)
    expected = prune_hh(MECHANISM.estimate(sums, N)[possible], MECHANISM.null_tail(N), 0.5)
    _, report = tree.advance(state, sums, N)
    assert report.threshold == expected.threshold
    assert report.finished_threshold is None
    assert report.kept == expected.kept.size


def test_last_round_elements_all_take_the_finished_target() -> None:
    config = TreeConfig(rounds=1, dim_limit=2**16, fp_ratio=0.5, fp_ratio_finished=0.05,
                        segment_bits=None)
    codec = Codec("5bit", 15)
    tree = PrefixTree(config, codec, MECHANISM)
    state = tree.initial_state()
    query = tree.query(state)
    assert query.segment_bits == 15
    rng = np.random.default_rng(5)
    sums = rng.binomial(N, MECHANISM.randomizer.a0, size=query.domain_size)
    states = codec.automaton.domain_states(codec.automaton.run(query.prefixes, 0), 15)
    possible = np.flatnonzero(states != DEAD)
    expected = prune_hh(MECHANISM.estimate(sums, N)[possible], MECHANISM.null_tail(N), 0.05)
    _, report = tree.advance(state, sums, N)
    assert report.threshold == report.finished_threshold == expected.threshold


def test_target_must_be_a_ratio_below_one() -> None:
    for bad in (0.0, 1.0, 1.5, -0.2):
        with pytest.raises(ConfigError, match="fp_ratio_finished"):
            PrefixTree(TreeConfig(rounds=4, fp_ratio_finished=bad), CODEC, MECHANISM)
