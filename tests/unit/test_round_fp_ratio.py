"""A false-positive target per round (issue 15, ``round_fp_ratio``): round r's PruneHH runs with
its own gamma for the elements that do not finish an item, against the same null law; the
default is fp_ratio in every round."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.codec.automaton import DEAD, ENDED
from fedhh.config import RunConfig
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
    states = CODEC.automaton.domain_states(CODEC.automaton.run(query.prefixes, 0),
                                           query.segment_bits)
    return tree, state, sums, states


@pytest.mark.parametrize("gamma", [0.05, 0.3, 0.9])
def test_the_round_takes_its_own_target(gamma: float) -> None:
    config = TreeConfig(rounds=4, dim_limit=2**16, fp_ratio=0.5,
                        round_fp_ratios=(gamma, 0.5, 0.5, 0.5))
    tree, state, sums, states = round_one(config)
    possible = np.flatnonzero(states != DEAD)
    expected = prune_hh(MECHANISM.estimate(sums, N)[possible], MECHANISM.null_tail(N), gamma)
    _, report = tree.advance(state, sums, N)
    assert report.threshold == expected.threshold
    assert report.kept == expected.kept.size
    assert report.expected_false_positives == pytest.approx(expected.expected_false_positives)


def test_a_lower_target_never_keeps_more() -> None:
    kept = []
    for gamma in (0.9, 0.5, 0.1, 0.01):
        config = TreeConfig(rounds=4, dim_limit=2**16, round_fp_ratios=(gamma, 0.5, 0.5, 0.5))
        tree, state, sums, _ = round_one(config)
        kept.append(tree.advance(state, sums, N)[1].kept)
    assert kept == sorted(kept, reverse=True)
    assert kept[0] > kept[-1]  # the targets matter on this round


def test_the_finished_target_still_applies_to_finishing_elements() -> None:
    config = TreeConfig(rounds=4, dim_limit=2**16, fp_ratio=0.5, fp_ratio_finished=0.1,
                        round_fp_ratios=(0.8, 0.5, 0.5, 0.5))
    tree, state, sums, states = round_one(config)
    estimates = MECHANISM.estimate(sums, N)
    tail = MECHANISM.null_tail(N)
    ends = np.flatnonzero(states == ENDED)
    others = np.flatnonzero((states != DEAD) & (states != ENDED))
    _, report = tree.advance(state, sums, N)
    assert report.threshold == prune_hh(estimates[others], tail, 0.8).threshold
    assert report.finished_threshold == prune_hh(estimates[ends], tail, 0.1).threshold


def test_equal_is_the_papers_single_target() -> None:
    default = round_one(TreeConfig(rounds=4, dim_limit=2**16))
    same = round_one(TreeConfig(rounds=4, dim_limit=2**16, round_fp_ratios=(0.5,) * 4))
    assert default[0].advance(default[1], default[2], N)[1] == \
        same[0].advance(same[1], same[2], N)[1]
    assert RunConfig().round_fp_ratios() is None
    assert RunConfig().tree().round_fp_ratios is None


def test_discoveries_form_converts_each_round() -> None:
    config = TreeConfig(rounds=2, fp_ratio_of="discoveries", round_fp_ratios=(2.0, 0.5))
    assert config.round_kept_fp_ratio(1) == pytest.approx(2 / 3)
    assert config.round_kept_fp_ratio(2) == pytest.approx(1 / 3)


@pytest.mark.parametrize("bad, message", [
    ("0.5,0.5", "2 gammas for 4 rounds"),
    ("0.5,x,0.5,0.5", "comma-separated gammas"),
    ("0.5,0,0.5,0.5", "fp_ratio"),
    ("0.5,1.0,0.5,0.5", "below 1"),
    ("0.5,-1,0.5,0.5", "fp_ratio"),
])
def test_bad_targets_are_refused(bad: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig(round_fp_ratio=bad).validate()


def test_tree_refuses_a_target_per_round_of_the_wrong_length() -> None:
    with pytest.raises(ConfigError, match="2 round false-positive targets for 4 rounds"):
        PrefixTree(TreeConfig(rounds=4, round_fp_ratios=(0.5, 0.5)), CODEC, MECHANISM)
