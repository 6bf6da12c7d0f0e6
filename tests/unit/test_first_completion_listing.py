"""What the first completion round loses (``PrefixTree._lost_first``): a last-main-round prefix
whose every extension the first completion round drops is listed cut when its estimate clears
a bar that holds the noise among those listed to the first completion round's own target, and
is not listed below it. Before, nothing the first completion round lost was listed: at 2,000
networked devices, eleven long items held by 35% of them vanished there without a trace.

The sums are the randomized response's expected sums (no noise drawn), so every estimate is
its true count to within a rounding: the tests are deterministic."""

from __future__ import annotations

import numpy as np

from fedhh.codec import Codec
from fedhh.server import PrefixTree, TreeConfig
from fedhh.server.mechanisms import LocalRandomizer, TailKind, VoteThreshold
from fedhh.server.prefixtree import TreeState
from fedhh.server.prune import prune_hh

N = 20_000
MECHANISM = LocalRandomizer(3.0, TailKind.BINOMIAL)  # null estimate's sigma ~66 at N
STRONG = "internationalization"  # 105 bits with the 5-bit code: past the main rounds' 20
WEAK = "uncharacteristically"    # as long, held by few more than the main rounds' threshold
SHORT = "cat"
COMPLETION = 8
GAMMAS = (0.5, 0.5, *(0.1 / (i * (i + 1)) for i in range(1, COMPLETION + 1)))


def tree_of(mechanism: object = MECHANISM) -> PrefixTree:
    config = TreeConfig(rounds=2 + COMPLETION, dim_limit=2**12, completion_rounds=COMPLETION,
                        main_bits=20, fp_ratio_finished=0.1, round_fp_ratios=GAMMAS)
    return PrefixTree(config, Codec("5bit", 120), mechanism)


def expected_sums(tree: PrefixTree, query, counts: dict[str, int]) -> np.ndarray:
    """Each element's expected randomized-response sum over N reports, rounded."""
    rr = MECHANISM.randomizer
    true = np.zeros(query.domain_size)
    index = query.domain_index(tree.codec.encode_many(list(counts)).codes)
    true[index[index >= 0]] = np.array(list(counts.values()))[index >= 0]
    return np.rint(N * rr.a0 + true * (rr.a1 - rr.a0)).astype(np.int64)


def fading(tree: PrefixTree, weak: int):
    """STRONG (2,000 devices) and WEAK (``weak``) both fade to nothing in the first
    completion round (round 3); SHORT is found in the main rounds."""
    state, reports, states = tree.initial_state(), [], []
    while not state.done:
        query = tree.query(state)
        gone = query.round > 2
        sums = (expected_sums(tree, query, {STRONG: 0 if gone else 2000,
                                            WEAK: 0 if gone else weak, SHORT: 1500})
                if isinstance(tree.mechanism, LocalRandomizer) else
                _votes(tree, query, {STRONG: 0 if gone else 30, WEAK: 0 if gone else 30,
                                     SHORT: 20}))
        states.append(state)
        state, report = tree.advance(state, sums, N)
        reports.append(report)
    return state, reports, states


def _votes(tree: PrefixTree, query, counts: dict[str, int]) -> np.ndarray:
    sums = np.zeros(query.domain_size, dtype=np.int64)
    index = query.domain_index(tree.codec.encode_many(list(counts)).codes)
    np.add.at(sums, index[index >= 0], np.array(list(counts.values()))[index >= 0])
    return sums


def after_main_threshold(tree: PrefixTree) -> float:
    """Round 2's threshold for the elements that go on."""
    return fading(tree, weak=250)[1][1].threshold


def starts(item: str, hitter) -> bool:
    # (its whole characters, less the bits it holds of the next codeword: ⟨+N bits⟩…)
    return item.startswith(hitter.item.rstrip("…").split("⟨+")[0])


def test_a_heavy_prefix_the_first_completion_round_loses_is_listed_cut() -> None:
    tree = tree_of()
    state, reports, states = fading(tree, weak=250)
    assert [h.item for h in tree.heavy_hitters(state)] == [SHORT]
    # Both long items' prefixes went on from the main rounds; the first completion round
    # kept neither. STRONG, far above noise, is listed at round 2's bits and estimate; WEAK,
    # kept by round 2 but within reach of its noise, is not.
    after_main = states[2]
    assert after_main.listing_domain > 0 and after_main.listing_participants == N
    assert len(after_main.prefixes) == 2
    [cut] = tree.cut_prefixes(state)
    assert starts(STRONG, cut) and not starts(WEAK, cut)
    assert (cut.round, cut.bits) == (2, reports[1].prefix_bits + reports[1].segment_bits)
    assert abs(cut.estimate - 2000) < 2
    assert [r.cut for r in reports] == [0, 0, 1]


def test_the_bar_holds_the_listed_noise_to_the_first_completion_rounds_target() -> None:
    # The same bar by hand: PruneHH at the first completion round's gamma (0.05) over the
    # lost estimates, against round 2's null law over its elements that end no item. WEAK at
    # 250 is under it (both are kept by round 2); at 2,000 it is over it and listed too.
    tree = tree_of()
    _, _, states = fading(tree, weak=250)
    after_main = states[2]
    estimates = np.array(after_main.parent_estimates)
    bar = prune_hh(estimates, MECHANISM.null_tail(N), GAMMAS[2],
                   domain_size=after_main.listing_domain)
    [listed] = estimates[bar.kept].tolist()
    assert abs(listed - 2000) < 2 and bar.threshold > 250 > after_main_threshold(tree)
    state, _, _ = fading(tree, weak=2000)
    assert sorted(starts(STRONG, h) + 2 * starts(WEAK, h) for h in tree.cut_prefixes(state)) \
        == [1, 2]


def test_without_a_null_law_nothing_the_first_completion_round_loses_is_listed() -> None:
    # Vote thresholds (TrieHH) have no law of a zero count to hold the noise against.
    tree = tree_of(VoteThreshold(5, 1.0))
    state, reports, _ = fading(tree, weak=30)
    assert tree.cut_prefixes(state) == [] and not any(r.cut for r in reports)


def test_a_persisted_state_keeps_what_the_listing_needs() -> None:
    tree = tree_of()
    _, _, states = fading(tree, weak=250)
    after_main = states[2]
    assert TreeState.from_dict(after_main.to_dict()) == after_main
    # A state stored before these fields lists nothing (it has no law to list against).
    old = {k: v for k, v in after_main.to_dict().items()
           if k not in ("listing_domain", "listing_participants")}
    assert TreeState.from_dict(old).listing_domain == 0
