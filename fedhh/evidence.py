"""What a round proved about the prefixes it kept: the probability that each is real.

A kept element is either real (some device selected it) or a false positive, a zero-count
element whose estimate happened to exceed the threshold. The null law of a zero-count estimate
is known exactly (``fedhh.estimate``), so the number of false positives expected among the
kept estimates in a window (a, b] is |D| (P0(X > a) - P0(X > b)), at most; divided by the
number of kept estimates in the window, it is the local false discovery rate of the window
(Efron, Tibshirani, Storey and Tusher 2001, "Empirical Bayes analysis of a microarray
experiment", JASA 96; taking the proportion of null elements as 1 only raises it). The kept
estimates are cut into windows of ``GROUP`` consecutive values, the rate is made
non-increasing in the estimate (a higher estimate is never less likely real), and
``1 - rate`` is the probability that the prefix is real.

The next round weighs its thresholds with it (``fedhh.prune``, weighted rule): the children of a
prefix that is probably a false positive all have zero counts, so the false-positive budget
spent on them is wasted; moving it to the children of prefixes that are surely real lowers
their thresholds. The weights come from the previous round's released sum, so they are fixed
before the next sum is drawn (each round's coins are fresh), as the weighted rule requires.
"""

from __future__ import annotations

import numpy as np

from fedhh.estimate import NullTail

GROUP = 50  # kept estimates per window of the local false discovery rate
LEVELS = 32  # weights are rounded to multiples of 1 / LEVELS (at least 1 / LEVELS)


def real_probability(estimates: np.ndarray, tail: NullTail, domain_size: int,
                     lower: float) -> np.ndarray:
    """For each kept estimate (any order), the probability that its element is real, given
    ``domain_size`` elements thresholded against ``tail`` and every kept estimate > ``lower``."""
    values = np.asarray(estimates, dtype=np.float64)
    out = np.ones(values.size)
    if values.size == 0:
        return out
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    edge = min(lower, float(ranked[0]) - 1e-9 * max(tail.sigma, 1.0))
    below = tail.sf(edge)
    rates = []
    starts = range(0, ranked.size, GROUP)
    for start in starts:
        top = float(ranked[min(start + GROUP, ranked.size) - 1])
        above = tail.sf(top)
        count = min(GROUP, ranked.size - start)
        rates.append(min(1.0, domain_size * max(below - above, 0.0) / count))
        below = above
    rate = np.minimum.accumulate(np.array(rates))
    for i, start in enumerate(starts):
        out[order[start : start + GROUP]] = 1.0 - rate[i]
    return out


def weight_levels(probabilities: np.ndarray) -> np.ndarray:
    """Probabilities rounded to the weight grid (few distinct thresholds), never 0."""
    p = np.asarray(probabilities, dtype=np.float64)
    return np.maximum(np.round(p * LEVELS), 1.0) / LEVELS
