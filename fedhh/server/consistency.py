"""Constrained inference over the tree (Hay, Rastogi, Miklau and Suciu 2010, "Boosting the
accuracy of differentially private histograms through consistency", PVLDB 3): single-item mode.

When every device keeps one item for every round and every device takes part, the devices that
report a child of prefix p in round t + 1 are exactly those that reported p in round t, so the
true counts are consistent: c_p = sum of c_c over p's children (children no honest device can
hold have count 0 exactly and are left out). Round t's estimate of p (variance v_p) and round
t + 1's estimates of its m possible children (variance v each, the zero-count variance) are
combined by least squares under that constraint (Hay et al., Theorem 3, one level): with the
residual r = e_p - sum_c e_c, each child becomes

    x_c = e_c + w r,  w = v / (v_p + m v).

(The multiple-item mode has no such constraint: prefix conditioning changes what devices
report from one round to the next, so a child can be reported more often than its parent.)

The null law of an adjusted estimate. For a child with c_c = 0, x_c = (1 - w) e_c + w Z with
Z = e_p - sum over the other children, independent of e_c (other devices' coins and another
round), of mean c_p - sum of the others' counts = 0 and variance v_p + (m - 1) v. Z is a sum of
m >= 2 independent estimates, taken as Gaussian (the central limit theorem over thousands of
children at the segments used). ``ConsistentTail`` bounds that law's tail from above:
P((1 - w) X + w Z > x) <= P(X > (x - a) / (1 - w)) + P(w Z > a), with a = 7 times the
standard deviation of w Z (P(w Z > a) = 1.3e-12), X the round's exact null law, and the
largest 1 - w and largest spread over the round's prefixes, so it dominates every element's
law and PruneHH's expected false positives stay an upper bound. With m in the thousands, w is about
1/m: the adjustment and the change of the null law are both a fraction of a percent of sigma,
which is why the gain is negligible here (docs/utility.md), unlike in Hay et al.'s binary trees.
A prefix with few possible children (fewer than ``MIN_CHILDREN``) would make w, hence the
bound for every element, large: it is left unadjusted (w = 0, its children keep the exact law,
which the bound dominates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedhh.server.estimate import NullTail

SPREAD_Z = 7.0  # P(w Z > a) with a = SPREAD_Z standard deviations
MIN_CHILDREN = 256  # prefixes with fewer possible children are left unadjusted (w = 0)


@dataclass(frozen=True)
class Adjustment:
    estimates: np.ndarray  # x_c per element (the possible ones; others unchanged)
    shrink: float          # the largest 1 - w over the prefixes
    spread: float          # the largest standard deviation of w Z over the prefixes


def adjust(estimates: np.ndarray, possible: np.ndarray, segment_bits: int,
           parent_estimates: np.ndarray, parent_variances: np.ndarray,
           child_variance: float) -> Adjustment:
    """The consistent estimates of a round's domain (prefix-major, 2^s children per prefix)."""
    per = 1 << segment_bits
    grid = np.asarray(estimates, dtype=np.float64).reshape(-1, per)
    mask = np.asarray(possible, dtype=bool).reshape(-1, per)
    m = mask.sum(axis=1).astype(np.float64)
    total = np.where(mask, grid, 0.0).sum(axis=1)
    v_p = np.asarray(parent_variances, dtype=np.float64)
    w = np.where(m >= MIN_CHILDREN, child_variance / (v_p + m * child_variance), 0.0)
    residual = np.asarray(parent_estimates, dtype=np.float64) - total
    adjusted = np.where(mask, grid + (w * residual)[:, None], grid).reshape(-1)
    spread = w * np.sqrt(v_p + np.maximum(m - 1, 0) * child_variance)
    return Adjustment(adjusted, float(np.max(1.0 - w)), float(np.max(spread)))


_ULP_STEPS = 1 << 10


@dataclass(frozen=True)
class ConsistentTail:
    """Upper bound on the tail of (1 - w) X + w Z (module docstring)."""

    base: NullTail
    shrink: float
    spread: float

    @property
    def sigma(self) -> float:
        return math.sqrt((self.shrink * self.base.sigma) ** 2 + self.spread**2)

    @property
    def _slack(self) -> float:
        return 0.5 * math.erfc(SPREAD_Z / math.sqrt(2.0)) if self.spread > 0 else 0.0

    def sf(self, x: float) -> float:
        shift = SPREAD_Z * self.spread
        return min(1.0, self.base.sf((x - shift) / self.shrink) + self._slack)

    def isf(self, p: float) -> float:
        """The smallest x with sf(x) <= p (no threshold reaches p <= the slack: +inf)."""
        if p <= self._slack:
            return math.inf
        x = self.base.isf(p - self._slack) * self.shrink + SPREAD_Z * self.spread
        # (x maps back to the base's lattice point only up to rounding: a few ulps up, where
        # the rounding had it one point below, which the tail counts)
        for _ in range(_ULP_STEPS):
            if self.sf(x) <= p:
                return x
            x = math.nextafter(x, math.inf)
        raise RuntimeError(f"no threshold within {_ULP_STEPS} ulps has a tail <= {p}")
