"""False-positive targets of their own (issue 15): for the elements that finish an item
(``fp_ratio_finished``: the two classes are thresholded separately by PruneHH, each against its
own target and the same null law, and the last round's elements all finish), and per round
(``round_fp_ratio``: round r's gamma for the elements that do not finish; default fp_ratio in
every round)."""

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
    return tree, state, query, sums


def domain_states(query):
    return CODEC.automaton.domain_states(CODEC.automaton.run(query.prefixes, 0),
                                         query.segment_bits)


def test_classes_are_thresholded_on_their_own() -> None:
    config = TreeConfig(rounds=4, dim_limit=2**16, fp_ratio=0.5, fp_ratio_finished=0.1)
    tree, state, query, sums = round_one(config)
    states = domain_states(query)
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
    states = domain_states(query)
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


# -- a target per round ------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.05, 0.3, 0.9])
def test_the_round_takes_its_own_target(gamma: float) -> None:
    config = TreeConfig(rounds=4, dim_limit=2**16, fp_ratio=0.5,
                        round_fp_ratios=(gamma, 0.5, 0.5, 0.5))
    tree, state, query, sums = round_one(config)
    states = domain_states(query)
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
        tree, state, _, sums = round_one(config)
        kept.append(tree.advance(state, sums, N)[1].kept)
    assert kept == sorted(kept, reverse=True)
    assert kept[0] > kept[-1]  # the targets matter on this round


def test_the_finished_target_still_applies_to_finishing_elements() -> None:
    config = TreeConfig(rounds=4, dim_limit=2**16, fp_ratio=0.5, fp_ratio_finished=0.1,
                        round_fp_ratios=(0.8, 0.5, 0.5, 0.5))
    tree, state, query, sums = round_one(config)
    states = domain_states(query)
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
    assert default[0].advance(default[1], default[3], N)[1] == \
        same[0].advance(same[1], same[3], N)[1]
    assert RunConfig().round_fp_ratios() is None
    assert RunConfig(completion_rounds=0).tree().round_fp_ratios is None


def test_completion_rounds_hold_every_element_to_the_finishing_target() -> None:
    """Issue 27: the main rounds keep fp_ratio for the elements that do not finish an item;
    completion rounds use the finishing target for all of theirs, split as gamma / (i (i + 1))
    so that a chain of completion rounds admits fewer than gamma false elements in all."""
    tree = RunConfig(rounds=4, completion_rounds=3, fp_ratio=0.5,
                     fp_ratio_finished=0.1).tree()
    assert tree.round_fp_ratios == pytest.approx((0.5,) * 4 + (0.05, 0.1 / 6, 0.1 / 12))
    assert tree.rounds == 7 and tree.completion_rounds == 3 and tree.main_bits == 60
    many = RunConfig(completion_rounds=1024).completion_fp_ratios()
    assert len(many) == 1024 and sum(many) < 0.1


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


def test_a_completion_round_holds_every_element_to_its_share_and_cuts_at_the_width() -> None:
    """A completion round thresholds all its elements, ending or not, with its own target
    (its share of the finishing target, ``RunConfig.completion_fp_ratios``): a junk ending
    is an item no device holds. An element that reaches the code's width unended is output
    as a cut prefix, as after the last completion round, not as a heavy hitter."""
    codec = Codec("5bit", 30)
    config = TreeConfig(rounds=2, completion_rounds=1, dim_limit=2**16, fp_ratio=0.5,
                        fp_ratio_finished=0.1, round_fp_ratios=(0.5, 0.02), main_bits=15)
    tree = PrefixTree(config, codec, MECHANISM)
    state = tree.initial_state()
    rng = np.random.default_rng(3)
    words = codec.encode_many(["xylophone", "zebrafish", "quietness", "a", "to"])
    reports = []
    for _ in range(2):
        query = tree.query(state)
        index = query.domain_index(words.codes)
        counts = np.zeros(query.domain_size, dtype=np.int64)
        counts[index[index >= 0]] = np.array([900, 800, 700, 600, 500])[index >= 0]
        sums = (rng.binomial(N - counts, MECHANISM.randomizer.a0)
                + rng.binomial(counts, MECHANISM.randomizer.a1))
        state, report = tree.advance(state, sums, N)
        reports.append(report)
    states = codec.automaton.domain_states(codec.automaton.run(query.prefixes, query.prefix_bits),
                                           query.segment_bits)
    assert query.prefix_bits + query.segment_bits == 30  # the last round reaches the width
    assert np.any(states == ENDED)  # so there are two classes it could have split into
    possible = np.flatnonzero(states != DEAD)
    expected = prune_hh(MECHANISM.estimate(sums, N)[possible], MECHANISM.null_tail(N), 0.02)
    assert reports[1].threshold == reports[1].finished_threshold == expected.threshold
    cut = tree.cut_prefixes(state)
    assert reports[1].cut == reports[1].kept == len(cut) >= 3 and reports[1].finished == 0
    assert {h.item for h in tree.heavy_hitters(state)} == {"a", "to"}
    assert {"xyloph…", "zebraf…", "quietn…"} <= {h.item for h in cut}
    assert all(h.truncated and h.bits == 30 for h in cut)
