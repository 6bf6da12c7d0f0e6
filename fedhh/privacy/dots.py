"""From upper bounds on a privacy profile at a few epsilons to a dominating loss distribution.

Connect the dots (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the Dots:
Tighter Discrete Approximations of Privacy Loss Distributions", Algorithm 1). The profile of a
privacy loss distribution with masses m_j at losses eps_j and m_inf at +infinity is, in
x = e^eps,

    delta(x) = m_inf + sum_{x_j > x} m_j (1 - x / x_j),    x_j = e^(eps_j),

piecewise linear with slope -sum_{x_j > x} m_j / x_j, equal to the total mass at x = 0. So
given values d_i >= delta_true(x_i) at points x_1 < ... < x_n, the measure with masses

    m_i = x_i (s_i - s_{i-1}),   s_0 = (d_1 - 1) / x_1 (the chord from (0, 1)),
    s_i = (d_{i+1} - d_i) / (x_{i+1} - x_i),   s_n = 0,   m_inf = 1 - sum m_i = d_n

has profile exactly the linear interpolation of (0, 1), (x_1, d_1), ..., (x_n, d_n), constant
after x_n. A true profile is convex in x and equal to 1 at x = 0, so it lies below that
interpolation: the measure dominates it everywhere. Its total mass is 1 and its other
distribution has mass sum m_i / x_i = -s_0 = (1 - d_1) / x_1 <= (1 - delta_true(x_1)) / x_1 <= 1,
so it is a genuine pair and compositions of it dominate (Zhu, Dong, Wang 2022, Theorem 10).

The masses must be >= 0, i.e. the slopes non-decreasing (the d_i convex in x). Computed upper
bounds are convex only up to rounding, and dp-accounting's own implementation
(``pld_pmf.create_pmf_pessimistic_connect_dots``) then clips negative masses to zero, which
leaves a total mass above 1 (3e-8 was seen on a sampled round): not a pair any more. Here the
values are raised to a non-increasing sequence and the slopes replaced by their running
maximum, which only raises the interpolation (every value stays an upper bound) and makes the
masses exactly >= 0; m_inf = 1 - sum m_i.

Rounding: m_j / x_j equals s'_j - s'_{j-1} within 3 ulps (the product, the quotient, and
x_j = e^eps_j itself), so the measure's slopes are within 3u |s'| of the interpolation's and
its profile within 3u min(1, x) (slopes are in [-1, 0], as a true profile is >= 1 - x) plus
the u of the total mass. Moving mass c from the largest atom (at x_k) to +infinity raises the
profile by c min(1, x / x_k) everywhere; c = 16 u max(1, x_k) covers it. (What remains is the
~1e-16 of the total mass, the level of dp-accounting's own float arithmetic.) The profile is
also recomputed from the masses as a check against bugs.

The measure is built by dp-accounting's ``pld_pmf.create_pmf`` (pessimistic).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dp_accounting.pld.pld_pmf import PLDPmf

# The recomputed profile may fall below the values by its own rounding only (a bug guard).
CHECK_TOLERANCE = 1e-9


def grid(low: float, high: float, step: float, unit: float) -> np.ndarray:
    """Integer multiples of ``unit`` covering [low, high], dense near 0.

    Spacing max(step, |x| / 200): privacy losses concentrate near 0; far out a profile is tiny
    and nearly linear in e^eps. The ends are rounded outwards.
    """
    lo_i, hi_i = math.floor(low / unit), math.ceil(high / unit)
    step_i = max(1, round(step / unit))

    def ray(limit: int) -> list[int]:
        out, x = [], 0
        while x < limit:
            out.append(x)
            x += max(step_i, x // 200)
        out.append(limit)
        return out

    pos = ray(hi_i) if hi_i > 0 else []
    neg = [-x for x in ray(-lo_i)] if lo_i < 0 else []
    points = np.unique(np.array([*neg, *pos, lo_i, hi_i], dtype=np.int64))
    return points[(points >= lo_i) & (points <= hi_i)]


def connect_dots(points: np.ndarray, values: np.ndarray, unit: float) -> PLDPmf:
    """A PLD PMF whose profile dominates every profile bounded by ``values`` at the points.

    ``points`` are strictly increasing integers (eps_i = points_i * unit); ``values`` are upper
    bounds on the profile there.
    """
    from dp_accounting.pld import pld_pmf

    points = np.asarray(points, dtype=np.int64)
    if points.size == 0 or np.any(np.diff(points) <= 0):
        raise ValueError("points must be a non-empty strictly increasing sequence")
    x = np.exp(points * unit)
    d = np.clip(np.maximum.accumulate(np.asarray(values, dtype=float)[::-1])[::-1], 0.0, 1.0)
    slopes = np.concatenate([[(d[0] - 1.0) / x[0]], np.diff(d) / np.diff(x), [0.0]])
    slopes = np.clip(np.maximum.accumulate(slopes), -1.0, 0.0)
    mass = x * np.diff(slopes)
    infinity = 1.0 - math.fsum(mass.tolist())
    k = int(np.argmax(mass))
    move = min(float(mass[k]), 16.0 * 2.0**-53 * max(1.0, float(x[k])))
    mass[k] -= move
    infinity += move
    shortfall = float(np.max(np.asarray(values, dtype=float) - _profile(mass, x, infinity)))
    if infinity < 0 or shortfall > CHECK_TOLERANCE:
        raise ValueError(f"connect-the-dots: the measure falls below the values by {shortfall:.3g}")
    return pld_pmf.create_pmf(
        dict(zip(points.tolist(), mass.tolist(), strict=True)), unit, infinity, True
    )


def _profile(mass: np.ndarray, x: np.ndarray, infinity: float) -> np.ndarray:
    """m_inf + sum_{j > i} m_j (1 - x_i / x_j) at every point, in extended precision."""
    m = mass.astype(np.longdouble)
    above = np.append(np.cumsum(m[::-1])[::-1][1:], np.longdouble(0))
    above_q = np.append(np.cumsum((m / x)[::-1])[::-1][1:], np.longdouble(0))
    return np.asarray(np.longdouble(infinity) + above - x * above_q, dtype=float)
