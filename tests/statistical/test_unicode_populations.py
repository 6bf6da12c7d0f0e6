"""Discovery on items that are not English words: German words, URLs and emoji from the data
that registry packages ship (`fedhh.data.itemsets`), each with a codebook trained on a public
sample of its domain. The true top items must be found, shown exactly, with none merged.

Statistical tolerance. Every run is seeded (deterministic). Before it runs, each test checks
that its population leaves a margin that makes a miss improbable for any seed: for each of the
true top-K items x, with E[c_x] = sum over the users u holding x of 1/d_u (d_u: u's distinct
items) a lower bound on the expected number of devices selecting x in any round (uniform
selection conditioned on the prefix list only removes competitors), we require

    E[c] - 6 sqrt(E[c]) - 6 sd(estimate at count c_hi) >= threshold_max,

where c_hi = E[c] + 6 sqrt(E[c]) bounds the variance (it grows with the count),
threshold_max = null_tail.isf(eta * gamma / P) bounds PruneHH's threshold (the loop stops
before E falls below eta * gamma * kept / P with at least one element kept), and the selection
count is a sum of independent Bernoulli variables (variance <= mean). Each of the two 6-sigma
events has probability < 1e-9 (Chebyshev-free: normal approximation of sums of 5e4 terms), so
a top item is missed with probability < 2e-9 per round; over K = 10 items, at most 20 rounds
and 3 populations the false-failure rate is below 1e-6. The runs have twice the rounds their
bits need (20 bits per round at most), so the planner never has to trim the prefix list down to
a few prefixes to finish in time, and each test asserts that no round trimmed it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator

import numpy as np
import pytest

from fedhh.codec import Codec, train_codebook
from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.data import itemsets, wordlists
from fedhh.data.itemsets import (
    ITEMSETS,
    sample_population,
    symbol_sample,
    url_items,
)
from fedhh.data.lexicon import WeightedStrings
from fedhh.data.truth import compute_truth
from fedhh.server import LocalRandomizer, TailKind, rr_variance
from fedhh.simulation.runner import simulate

USERS = 50_000
TOKENS = 20.0
TOP = 10
P = 1 << 20
EPS_LOCAL = 6.0
GAMMA, ETA = 0.5, 0.5


# The item distributions and codebooks are deterministic functions of installed data; the
# tests below ask for some of them twice, so each is computed once per session.
@functools.cache
def _frequencies(lang: str, wordlist: str) -> tuple[list[str], np.ndarray]:
    return wordlists.wordfreq_frequencies(lang, wordlist)


@pytest.fixture(scope="module", autouse=True)
def frequencies_read_once() -> Iterator[None]:
    """Each wordfreq list read once for the module, each caller given its own copy: the URL
    population and the sites' codebook read the same 13 languages' lists (~0.5 s a list)."""
    def read(lang: str = "en", wordlist: str = "large") -> tuple[list[str], np.ndarray]:
        words, freqs = _frequencies(lang, wordlist)
        return list(words), freqs.copy()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(itemsets, "wordfreq_frequencies", read)
        yield


@functools.cache
def item_distribution(name: str) -> WeightedStrings:
    return ITEMSETS[name]()


def german_book() -> str:
    return "german"


@functools.cache
def url_book() -> str:
    """Trained on the list of sites (each https://<domain>/ once): a public list of domains."""
    sites = [(s, 1.0) for s in url_items(paths_per_domain=0).strings]
    return train_codebook(sites, "sites").spec


@functools.cache
def emoji_book() -> str:
    """Trained on Unicode's symbol characters (weight 1 each), not on their frequencies."""
    return train_codebook(symbol_sample(), "symbols").spec


CASES = {
    "german": (german_book, 96),
    "urls": (url_book, 192),
    "emoji": (emoji_book, 128),
}


def selection_lower_bounds(dataset, items: np.ndarray) -> np.ndarray:
    """E[c_x] lower bounds: sum over holders u of x of 1 / d_u."""
    distinct = np.diff(dataset.indptr)
    users = np.repeat(np.arange(dataset.num_users), distinct)
    weight = 1.0 / distinct[users]
    per_item = np.bincount(dataset.items, weights=weight, minlength=len(dataset.vocabulary))
    return per_item[items]


@pytest.mark.parametrize("name", list(CASES))
def test_true_top_items_are_found_exactly_and_none_merged(name: str) -> None:
    make_book, max_bits = CASES[name]
    dataset = sample_population(item_distribution(name), USERS, TOKENS, seed=11, name=name)
    truth = compute_truth(dataset)
    top = truth.top(TOP, weighted=False)
    top_items = [dataset.vocabulary[i] for i in top.tolist()]

    mechanism = LocalRandomizer(EPS_LOCAL, TailKind.BINOMIAL)
    rr = mechanism.randomizer
    threshold_max = mechanism.null_tail(USERS).isf(ETA * GAMMA / P)
    mean = selection_lower_bounds(dataset, top)
    high = mean + 6 * np.sqrt(mean)
    sd = np.sqrt(rr_variance(high, USERS, rr))
    assert np.all(mean - 6 * np.sqrt(mean) - 6 * sd >= threshold_max), \
        f"{name}: the population leaves no 6-sigma margin; the test would be unreliable"

    codec = Codec(make_book(), max_bits)
    encoded = codec.encode_many(list(dataset.vocabulary))
    assert not encoded.truncated[top].any()
    whole = ~encoded.truncated
    assert np.unique(encoded.codes[whole]).size == int(whole.sum())  # lossless: no merges
    # Twice the rounds the bits need: the plan never has to trim the prefix list to finish.
    rounds = math.ceil(max_bits / 10)
    config = RunConfig(rounds=rounds, dim_limit=P, fp_ratio=GAMMA, eta=ETA,
                       eps_local=EPS_LOCAL, tail="binomial", codec=codec.spec,
                       max_bits=max_bits, seed=5, completion_rounds=0,
                       fp_ratio_finished=None)  # the one target the bound above assumes
    result = simulate(dataset, config, truth)
    assert all(r["trimmed"] == 0 for r in result.rounds)

    shown = {h.item: h for h in result.heavy_hitters}
    for item in top_items:
        assert item in shown, f"{name}: true top item {item!r} was not found"
        assert shown[item].ended and not shown[item].truncated
        assert codec.display_item(shown[item].code) == item
    assert len(shown) == len(result.heavy_hitters)  # no two entries show the same text
    codes = cw.from_ints([h.code for h in result.heavy_hitters], max_bits)
    vocabulary_codes = np.sort(encoded.codes)
    held = cw.index_in(vocabulary_codes, codes) >= 0
    # Every discovered code that some user holds stands for exactly one item (none merged).
    for h, is_held in zip(result.heavy_hitters, held.tolist(), strict=True):
        if is_held and h.ended:
            assert h.item in set(dataset.vocabulary)
    assert result.metrics["unweighted"]["recall_at"]["10"] == 1.0


def test_emoji_that_share_prefixes_stay_apart() -> None:
    """👍 and its skin tones, and a person with and without a modifier, are distinct items whose
    codes share long prefixes; each is decoded back exactly."""
    codec = Codec(emoji_book(), 128)
    pairs = ["👍", "👍🏻", "👍🏼", "🤷\u200d♂️", "🤷🏻\u200d♂️", "❤", "❤️"]
    assert set(pairs) <= set(item_distribution("emoji").strings)
    codes = codec.encode_many(pairs).codes
    assert np.unique(codes).size == len(pairs)
    assert [codec.display_item(c) for c in cw.to_ints(codes)] == pairs
