"""What a round proved about the prefixes it kept: the probability that each is real.

A kept element is either real (some device selected it) or a false positive, a zero-count
element whose estimate happened to exceed the threshold. The null law of a zero-count estimate
is known exactly (``fedhh.server.estimate``), so the number of false positives expected among the
kept estimates in a window (a, b] is |D| (P0(X > a) - P0(X > b)), at most; divided by the
number of kept estimates in the window, it is the local false discovery rate of the window
(Efron, Tibshirani, Storey and Tusher 2001, "Empirical Bayes analysis of a microarray
experiment", JASA 96; taking the proportion of null elements as 1 only raises it). The kept
estimates are cut into windows of ``GROUP`` consecutive values, the rate is made
non-increasing in the estimate (a higher estimate is never less likely real), and
``1 - rate`` is the probability that the prefix is real.

The next round weighs its thresholds with it (``fedhh.server.prune``, weighted rule): the
children of a prefix that is probably a false positive all have zero counts, so the budget
spent on them is wasted; moving it to the children of prefixes that are surely real lowers
their thresholds. The weights come from the previous round's released sum, so they are fixed
before the next sum is drawn (each round's coins are fresh), as the weighted rule requires.
"""

from __future__ import annotations

import numpy as np

from fedhh.server.estimate import NullTail

GROUP = 50  # kept estimates per window of the local false discovery rate
LEVELS = 32  # weights are rounded to multiples of 1 / LEVELS (at least 1 / LEVELS)


def real_probability(estimates: np.ndarray, tail: NullTail, domain_size: int,
                     lower: float) -> np.ndarray:
    """For each kept estimate (any order), the probability that its element is real, given
    ``domain_size`` elements thresholded against ``tail`` and every kept estimate > ``lower``.

    Windows hold at least ``GROUP`` estimates and never split equal values: under the exact
    (lattice) null law many kept estimates are equal, and a window boundary between equal
    values would credit the null mass of their lattice point to one window only."""
    values = np.asarray(estimates, dtype=np.float64)
    out = np.ones(values.size)
    if values.size == 0:
        return out
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    ends = _window_ends(ranked)
    edge = min(lower, float(ranked[0]) - 1e-9 * max(tail.sigma, 1.0))
    below = tail.sf(edge)
    rates = []
    start = 0
    for end in ends:
        above = tail.sf(float(ranked[end - 1]))
        rates.append(min(1.0, domain_size * max(below - above, 0.0) / (end - start)))
        below, start = above, end
    rate = np.minimum.accumulate(np.array(rates))
    start = 0
    for i, end in enumerate(ends):
        out[order[start:end]] = 1.0 - rate[i]
        start = end
    return out


def _window_ends(ranked: np.ndarray) -> list[int]:
    """Ends (exclusive) of consecutive windows of the ascending values, each of at least
    ``GROUP`` values (the last may be smaller) and each ending where the value changes."""
    change = np.flatnonzero(np.diff(ranked) > 0) + 1  # first index of each new value
    boundaries = [*change.tolist(), ranked.size]
    ends: list[int] = []
    start = 0
    for b in boundaries:
        if b - start >= GROUP or b == ranked.size:
            ends.append(b)
            start = b
    return ends


def weight_levels(probabilities: np.ndarray) -> np.ndarray:
    """Probabilities rounded to the weight grid (few distinct thresholds), never 0."""
    p = np.asarray(probabilities, dtype=np.float64)
    return np.maximum(np.round(p * LEVELS), 1.0) / LEVELS
