"""At the defaults (the `general` codebook, completion rounds, the output's false-positive target)
a population whose top items are of every kind finds each of them exactly: numbers, a version,
URLs, an e-mail address, emoji (one with a skin-tone modifier), German words with umlauts and a
33-letter compound, Japanese words, and a 45-letter English word whose code (218 bits) is
nearly four times max_bits (issue 27).

Statistical tolerance. The run is seeded (deterministic). Before it runs, the test checks that
the population leaves a margin that makes a miss improbable for any seed, as
tests/statistical/test_unicode_populations.py does: for each top item x, E[c_x] = sum over the
users u holding x of 1/d_u (d_u: u's distinct items) bounds from below the expected number of
devices choosing x in any round (selection conditioned on the prefix list only removes
competitors), and we require

    E[c] - 6 sqrt(E[c]) - 6 sd(estimate at count c_hi) >= threshold_max,

with c_hi = E[c] + 6 sqrt(E[c]) and threshold_max = null_tail.isf(eta * gamma_min / P),
gamma_min the smallest target of the rounds that can find the item (the completion rounds'
targets fall as gamma / (i (i + 1)), ``RunConfig.completion_fp_ratios``): PruneHH stops before
its threshold passes that. An
item whose code ends within max_bits is found by a main round: the bound is at the main rounds'
local epsilon. A longer item is found by a completion round, at its (smaller) local epsilon;
there only the prefixes of items longer than max_bits are on the list (every shorter item has
ended, and an ended element never carries on), so its holders choose among their long items
only: d_u counts those. The later completion rounds weigh less (``RunConfig.completion_weights``),
so the bound is at the smallest epsilon among the completion rounds an item can need: a round
carrying m prefixes adds floor(log2(P / m)) bits, and a round keeps at most
m_max = 2 USERS / threshold_main elements (each device reports once, so at most USERS /
threshold_main true elements reach the smallest threshold; PruneHH keeps false ones below
gamma < 1/2 of what it keeps), so an item of L bits needs at most ceil(L / floor(log2(P /
m_max))) rounds in all. Each 6-sigma event has probability below 1e-9 (normal approximation of
sums of thousands of terms), so a top item is missed with probability below 2e-9 per round;
over 16 items and at most 20 rounds an item is in (4 main, at most 16 completion rounds:
asserted) the false-failure rate is below 1e-6. The test asserts it
found the longest item (218 bits) and that the run used completion rounds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.config import Mode, RunConfig
from fedhh.data.itemsets import sample_population
from fedhh.data.lexicon import WeightedStrings
from fedhh.data.truth import compute_truth
from fedhh.data.wordlists import spellchecker_counts
from fedhh.privacy import solver
from fedhh.privacy.accountant import allocation_offsets
from fedhh.privacy.methods import DEFAULT_METHOD
from fedhh.server import LocalRandomizer, TailKind, rr_variance
from fedhh.simulation.runner import simulate

USERS = 30_000
TOKENS = 10.0
TOP = [
    "42", "2024", "3.14159", "v2.3.1", "https://www.wikipedia.org/", "https://github.com/",
    "support@example.org", "😂", "👍🏽", "Straße", "Übersetzung",
    "Donaudampfschifffahrtsgesellschaft", "ありがとう", "東京", "日本語",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
]
TOP_SHARE = 0.03  # of the tokens, each
LONG = [
    "👨\u200d👩\u200d👧\u200d👦", "pneumonoultramicroscopicsilicovolcanoconiosis",
    "https://example.com/search?q=hitters", "Carol.O'Neil@Example.CO.UK",
    "안녕하세요",
]


@functools.cache
def english() -> tuple[tuple[str, int], ...]:
    """pyspellchecker's English counts, read once for both tests (~1 s a read)."""
    return tuple(spellchecker_counts("en"))


@pytest.fixture
def solved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``solve_allocation`` remembering its answers: the run's own solve of the allocation is
    the margin check's, answered again rather than solved twice (~a fifth of the test, the
    same solution)."""
    solve = solver.solve_allocation
    answers: dict[tuple[object, ...], solver.LocalEpsilonSolution] = {}

    def remembered(eps_agg: float, delta: float, offsets: object, num_devices: int,
                   sampling_rate: float = 1.0, method: str = DEFAULT_METHOD
                   ) -> solver.LocalEpsilonSolution:
        key = (eps_agg, delta, tuple(map(float, offsets)),  # type: ignore[call-overload]
               num_devices, sampling_rate, method)
        if key not in answers:
            answers[key] = solve(eps_agg, delta, offsets, num_devices,  # type: ignore[arg-type]
                                 sampling_rate, method)
        return answers[key]

    monkeypatch.setattr(solver, "solve_allocation", remembered)


def population(top: list[str], share: float, extra: dict[str, float] | None = None
               ) -> WeightedStrings:
    """``top`` at ``share`` of the tokens each, ``extra`` items at theirs, English words Zipf
    over the rest."""
    extra = extra or {}
    words = [w for w, _ in english()[:20_000] if w not in top and w not in extra]
    tail = 1.0 / np.arange(1, len(words) + 1)
    tail *= (1 - share * len(top) - sum(extra.values())) / tail.sum()
    return WeightedStrings(tuple(top + list(extra) + words),
                           np.concatenate([np.full(len(top), share),
                                           np.array(list(extra.values())), tail]))


def assert_found_whole(dataset, top: list[str]) -> None:  # type: ignore[no-untyped-def]
    """The margin (module docstring) for every item of ``top``, then the seeded run finds
    each exactly."""
    config = RunConfig(seed=3)
    weights = config.round_weights()
    assert weights is not None
    offsets = allocation_offsets(weights)
    n = dataset.num_users
    eps = solver.solve_allocation(config.eps_agg, config.delta, offsets, n).eps_local
    gammas = config.tree().round_fp_ratios
    assert gammas is not None
    # (a main round holds the elements that finish an item to fp_ratio_finished)
    finishing = config.fp_ratio_finished or config.fp_ratio
    gammas = tuple(min(g, finishing) for g in gammas[:config.rounds]) + gammas[config.rounds:]
    p_limit = config.resolved_dim_limit(Mode.SIMULATION)
    codec = Codec.from_spec(config.codec, config.code_bits())
    long_item = codec.encode_many(list(dataset.vocabulary)).lengths > config.max_bits
    distinct = np.diff(dataset.indptr)
    users = np.repeat(np.arange(n), distinct)
    distinct_long = np.bincount(users, weights=long_item[dataset.items], minlength=n)
    index = {w: i for i, w in enumerate(dataset.vocabulary)}
    threshold_main = LocalRandomizer(eps, TailKind.BINOMIAL).null_tail(n).isf(
        config.eta * min(gammas[:config.rounds]) / p_limit)
    fewest_bits = math.floor(math.log2(p_limit * threshold_main / (2 * n)))
    lengths = codec.encode_many(top).lengths
    for item, length in zip(top, lengths.tolist(), strict=True):
        completed = bool(long_item[index[item]])
        needed = math.ceil(length / fewest_bits) - config.rounds  # completion rounds, at most
        # (at most 16: the false-failure rate above counts at most 20 rounds an item is in)
        assert needed <= min(config.completion(), 16), (item, needed)
        rounds = slice(config.rounds, config.rounds + needed) if completed else slice(
            0, config.rounds)
        weakest = min(offsets[rounds], default=0.0) if completed else 0.0
        mechanism = LocalRandomizer(eps + weakest, TailKind.BINOMIAL)
        threshold = mechanism.null_tail(n).isf(config.eta * min(gammas[rounds]) / p_limit)
        holders = users[dataset.items == index[item]]
        expected = float(np.sum(1.0 / (distinct_long if completed else distinct)[holders]))
        high = expected + 6 * math.sqrt(expected)
        sd = math.sqrt(float(rr_variance(high, n, mechanism.randomizer)))
        assert expected - 6 * math.sqrt(expected) - 6 * sd >= threshold, (item, expected)

    truth = compute_truth(dataset)
    result = simulate(dataset, config, truth)
    assert result.privacy["eps_local"] == eps  # the run's solve was the check's
    found = {h.item: h for h in result.heavy_hitters}
    for item in top:
        assert item in found, f"{item!r} was not found"
        assert found[item].ended and not found[item].truncated
    assert len(result.rounds) > config.rounds  # completion rounds did it


def test_top_items_of_every_kind_are_found_exactly_at_the_defaults(
        solved_once: None) -> None:
    dataset = sample_population(population(TOP, TOP_SHARE), USERS, TOKENS, 7, "kinds")
    assert Codec.from_spec(RunConfig().codec, 1024).encode_many([TOP[-1]]).lengths[0] == 218
    assert_found_whole(dataset, TOP)


def test_long_items_among_a_tail_of_long_urls_are_found_whole(
        solved_once: None) -> None:
    """Long heavy items while ~60 lighter long URLs are still going: with ~40 prefixes open a
    completion round adds ~17 bits, not 23, so seven rounds left the 45-letter word (218
    bits), the e-mail address (238) and the Korean word (233) cut."""
    tail = {f"https://site{n}.example.net/p/{n * 37}": 0.002 for n in range(60)}
    dataset = sample_population(population(LONG, 2 * TOP_SHARE, tail), 2 * USERS, TOKENS, 11,
                                "long")
    assert_found_whole(dataset, LONG)
