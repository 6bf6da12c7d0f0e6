"""Frequency estimation from a round's aggregate, and the null distributions used to threshold.

For asymmetric randomized response (a0 = P[0 -> 1], a1 = P[1 -> 1]) the aggregate of n reports at
coordinate w is S_w = Bin(c_w, a1) + Bin(n - c_w, a0), where c_w devices selected w. The estimator

    f(w) = (S_w - n a0) / (a1 - a0)

is unbiased (E[S_w] = c_w a1 + (n - c_w) a0), with variance

    Var f(w) = (c_w a1 (1 - a1) + (n - c_w) a0 (1 - a0)) / (a1 - a0)^2

(Feldman and Talwar 2021, "Lossless Compression of Efficient Private Local Randomizers", Lemma 4.2;
the paper's Appendix "PI-RAPPOR", equation for f~[w]). For a zero-count item the standard
deviation is ``sqrt(n a0 (1 - a0)) / (a1 - a0)``; since a1 (1 - a1) = 1/4 is the largest value of
p(1 - p), ``sqrt(n / 4) / (a1 - a0)`` bounds it for every count.

A *null tail* is the distribution of the estimate of an item no device selected; PruneHH needs its
survival function and inverse. The paper uses the Gaussian approximation (Section "Adaptive
Thresholding"); for small n its footnote suggests exact binomial bounds, which ``BinomialTail``
gives; central baselines use the Laplace or Gaussian noise law itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

import numpy as np


def _stats() -> ModuleType:
    """scipy.stats, imported on first use: it takes about a second, and a device process or a
    run that never tests a threshold should not wait for it."""
    from scipy import stats

    return stats


class BitRates(Protocol):
    """P[0 -> 1] (a0) and P[1 -> 1] (a1) of a report's bit: one-hot + randomized response
    (``fedhh.device.randomizer.RandomizedResponse``), or PI-RAPPOR's rates in a round, whose decoded
    counts have the same law (``fedhh.pirappor``)."""

    @property
    def a0(self) -> float: ...

    @property
    def a1(self) -> float: ...


def rr_estimate(sums: np.ndarray, n: int, rr: BitRates) -> np.ndarray:
    """Unbiased count estimates f(w) = (S_w - n a0) / (a1 - a0)."""
    return (np.asarray(sums, dtype=np.float64) - n * rr.a0) / (rr.a1 - rr.a0)


def rr_variance(count: float | np.ndarray, n: int, rr: BitRates) -> float | np.ndarray:
    """Var f(w) for an item selected by ``count`` of the n devices."""
    a0, a1 = rr.a0, rr.a1
    return (count * a1 * (1 - a1) + (n - count) * a0 * (1 - a0)) / (a1 - a0) ** 2


def rr_null_std(n: int, rr: BitRates) -> float:
    """Standard deviation of f(w) for a zero-count item: sqrt(n a0 (1 - a0)) / (a1 - a0)."""
    return math.sqrt(n * rr.a0 * (1 - rr.a0)) / (rr.a1 - rr.a0)


def rr_std_upper(n: int, rr: BitRates) -> float:
    """Upper bound on the standard deviation of f(w) for any count: sqrt(n / 4) / (a1 - a0)."""
    return math.sqrt(n / 4) / (rr.a1 - rr.a0)


class NullTail(Protocol):
    """Law of the estimate of a zero-count item: scale, survival function and its inverse."""

    @property
    def sigma(self) -> float: ...

    def sf(self, x: float) -> float:
        """P[estimate > x]."""
        ...

    def isf(self, p: float) -> float:
        """The threshold x with P[estimate > x] <= p (the smallest such, for discrete laws)."""
        ...


@dataclass(frozen=True)
class GaussianTail:
    """N(0, sigma^2): the paper's approximation E = 1 - Phi(tau) at threshold tau * sigma."""

    sigma: float

    def sf(self, x: float) -> float:
        return float(_stats().norm.sf(x / self.sigma))

    def isf(self, p: float) -> float:
        return float(_stats().norm.isf(p)) * self.sigma


@dataclass(frozen=True)
class LaplaceTail:
    """Laplace(0, b): P[X > x] = exp(-x / b) / 2 for x >= 0 (standard deviation b sqrt 2)."""

    scale: float

    @property
    def sigma(self) -> float:
        return self.scale * math.sqrt(2.0)

    def sf(self, x: float) -> float:
        return float(_stats().laplace.sf(x, scale=self.scale))

    def isf(self, p: float) -> float:
        return float(_stats().laplace.isf(p, scale=self.scale))


@dataclass(frozen=True)
class BinomialTail:
    """Exact law of f(w) for a zero-count item: (Bin(n, a0) - n a0) / (a1 - a0).

    Thresholds land on the lattice of attainable estimates, so comparing an estimate with the
    threshold is the exact integer comparison S_w > k.
    """

    n: int
    rr: BitRates

    @property
    def sigma(self) -> float:
        return rr_null_std(self.n, self.rr)

    def _to_estimate(self, k: int) -> float:
        # (the operations of rr_estimate, in its order: the same float for the same sum)
        return (k - self.n * self.rr.a0) / (self.rr.a1 - self.rr.a0)

    def _sums_not_above(self, x: float) -> int:
        """The largest sum k whose estimate is at most ``x``, so that estimate > x <=> S > k.

        Found by comparing the estimates themselves, as the threshold compares them: mapping
        ``x`` back to a sum in floating point (``floor(n a0 + x (a1 - a0))``) landed one below
        k for ~1 lattice point in 120, and the tail then counted S = k, which is not kept."""
        k = math.floor(self.n * self.rr.a0 + x * (self.rr.a1 - self.rr.a0))
        while self._to_estimate(k + 1) <= x:
            k += 1
        while self._to_estimate(k) > x:
            k -= 1
        return k

    def sf(self, x: float) -> float:
        """P[estimate > x] for a zero-count item (exact)."""
        if math.isinf(x):
            return 0.0 if x > 0 else 1.0
        return float(_stats().binom.sf(self._sums_not_above(x), self.n, self.rr.a0))

    def isf(self, p: float) -> float:
        k = int(_stats().binom.isf(p, self.n, self.rr.a0))
        while k > 0 and _stats().binom.sf(k - 1, self.n, self.rr.a0) <= p:
            k -= 1
        while _stats().binom.sf(k, self.n, self.rr.a0) > p:
            k += 1
        # estimate > x  <=>  S > k, for x on the lattice point of k.
        return self._to_estimate(k)
