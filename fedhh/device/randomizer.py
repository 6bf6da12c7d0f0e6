"""The local randomizer: one-hot encoding plus asymmetric binary randomized response.

A device's report over a round's domain of size D is the one-hot vector of its selected element
(the all-zeros vector when it has nothing to report), each coordinate then flipped independently:
a 1 stays 1 with probability a1 = 1/2 and a 0 becomes 1 with probability a0 = 1/(e^eps + 1)
(McMillan et al. 2022, "Private Federated Statistics in an Interactive Setting", Appendix A;
Feldman et al. 2022, PI-RAPPOR, the replacement setting alpha_0 = 1/(e^eps + 1), alpha_1 = 1/2).

Privacy (eps-LDP under replacement). Two inputs differ in at most two coordinates, each a 1 in
one input and a 0 in the other, so for any output the likelihood ratio is at most
``(a1 / a0) * ((1 - a0) / (1 - a1)) = (1 - a0) / a0``, which equals e^eps for the exact a0.

Implementation. Coins are drawn as uniform 32-bit words compared with integer thresholds:
a coordinate is 1 when its word is below ``threshold``. a1 = 2^31 / 2^32 exactly. a0 is the
rational ``m / 2^32`` with ``m`` the smallest integer with ``m / 2^32 >= 1/(e^eps + 1)``, the
exact ceiling of 2^32 / (e^eps + 1) for eps the double given (``a0_threshold``: decimal interval
arithmetic, its precision doubled until the interval's ends have the same ceiling); rounding a0
up only lowers (1 - a0)/a0, so the implemented randomizer is eps-LDP exactly, with (1 - a0)/a0
within 2^-32 * (e^eps + 1)^2 of e^eps. The estimator and the simulator use the implemented
rational a0, not the real number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal
from functools import lru_cache

import numpy as np

from fedhh.device.randomness import RandomSource, as_source
from fedhh.errors import ConfigError

WORD_BITS = 32
SCALE = 1 << WORD_BITS
A1_THRESHOLD = SCALE // 2


START_DIGITS = 120  # settles every double tried; a closer call doubles the digits


@lru_cache(maxsize=256)
def a0_threshold(eps_local: float) -> int:
    """Smallest m with m / 2^32 >= 1 / (e^eps + 1): the implemented P[0 -> 1] is m / 2^32.

    Exact: m = ceil(2^32 / (e^eps + 1)) for the double ``eps_local`` (``_threshold_at`` with
    ``START_DIGITS`` digits, doubled until it settles). It always settles: 2^32 / (e^eps + 1) is
    never an integer, e^eps being transcendental for a rational eps != 0 (Lindemann-Weierstrass
    theorem), so some precision puts an enclosing interval strictly between two integers. Before,
    a 120-digit value was rounded up unchecked: right unless the ratio came within ~10^-110 of an
    integer, which was not ruled out (clients/web/src/randomizer.ts was already exact)."""
    if not (math.isfinite(eps_local) and eps_local > 0):
        raise ConfigError(f"eps_local must be a positive finite number, got {eps_local}")
    if eps_local >= 64:
        # 2^32 / (e^64 + 1) < 1, so the threshold is its floor 1 (as clients/web computes it);
        # Decimal's exp overflowed (decimal.Overflow, no ConfigError) above eps ~2.3e6.
        return 1
    digits = START_DIGITS
    while (m := _threshold_at(eps_local, digits)) is None:
        digits *= 2
    return max(m, 1)


def _threshold_at(eps_local: float, digits: int) -> int | None:
    """ceil(2^32 / (e^eps + 1)) if ``digits``-digit interval arithmetic settles it, else None.

    Decimal(eps) is the double exactly; its exp is correctly rounded (Python's decimal module,
    ``Decimal.exp``), so e^eps lies strictly between the neighbours of the rounded value; the
    sum and the quotient are rounded outwards (floor for the lower end, ceiling for the upper),
    so the interval [low, high] holds 2^32 / (e^eps + 1), and ceil(low) = ceil(high) is its
    ceiling."""
    near = Context(prec=digits, rounding=ROUND_HALF_EVEN)
    down = Context(prec=digits, rounding=ROUND_FLOOR)
    up = Context(prec=digits, rounding=ROUND_CEILING)
    power = near.exp(Decimal(eps_local))
    low = down.divide(Decimal(SCALE), up.add(near.next_plus(power), 1))
    high = up.divide(Decimal(SCALE), down.add(near.next_minus(power), 1))
    m_low = int(low.to_integral_value(rounding=ROUND_CEILING))
    m_high = int(high.to_integral_value(rounding=ROUND_CEILING))
    return m_low if m_low == m_high else None


@dataclass(frozen=True)
class RandomizedResponse:
    """Asymmetric binary randomized response at local epsilon ``eps_local``."""

    eps_local: float

    def __post_init__(self) -> None:
        a0_threshold(self.eps_local)  # validates

    @property
    def threshold0(self) -> int:
        return a0_threshold(self.eps_local)

    @property
    def threshold1(self) -> int:
        return A1_THRESHOLD

    @property
    def a0(self) -> float:
        """Implemented P[0 -> 1] (a dyadic rational, exact as a float)."""
        return self.threshold0 / SCALE

    @property
    def a1(self) -> float:
        return self.threshold1 / SCALE

    def randomize(self, index: int | None, dim: int, rng: RandomSource | np.random.Generator
                  ) -> np.ndarray:
        """The report's 1-bit positions (sorted int64) for one-hot ``index`` (None = nothing)."""
        if dim < 1:
            raise ConfigError(f"domain size must be >= 1, got {dim}")
        if index is not None and not 0 <= index < dim:
            raise ConfigError(f"selected index {index} is outside the domain [0, {dim})")
        words = as_source(rng).uint32(dim)
        ones = words < np.uint32(self.threshold0)
        if index is not None:
            ones[index] = words[index] < np.uint32(self.threshold1)
        return np.flatnonzero(ones)
