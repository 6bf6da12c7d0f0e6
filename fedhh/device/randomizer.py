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
rational ``m / 2^32`` with ``m`` the smallest integer with ``m / 2^32 >= 1/(e^eps + 1)``, computed
in 120-digit decimal arithmetic; rounding a0 up only lowers (1 - a0)/a0, so the implemented
randomizer is eps-LDP exactly, with (1 - a0)/a0 within 2^-32 * (e^eps + 1)^2 of e^eps. The
estimator and the simulator use the implemented rational a0, not the real number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from functools import lru_cache

import numpy as np

from fedhh.device.randomness import RandomSource, as_source
from fedhh.errors import ConfigError

WORD_BITS = 32
SCALE = 1 << WORD_BITS
A1_THRESHOLD = SCALE // 2


@lru_cache(maxsize=256)
def a0_threshold(eps_local: float) -> int:
    """Smallest m with m / 2^32 >= 1 / (e^eps + 1): the implemented P[0 -> 1] is m / 2^32."""
    if not (math.isfinite(eps_local) and eps_local > 0):
        raise ConfigError(f"eps_local must be a positive finite number, got {eps_local}")
    if eps_local >= 64:
        # 2^32 / (e^64 + 1) < 1, so the threshold is its floor 1 (as clients/web computes it);
        # Decimal's exp overflowed (decimal.Overflow, no ConfigError) above eps ~2.3e6.
        return 1
    with localcontext() as ctx:
        ctx.prec = 120
        exact = Decimal(SCALE) / (Decimal(eps_local).exp() + 1)
        m = int(exact.to_integral_value(rounding=ROUND_CEILING))
    return max(m, 1)


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
