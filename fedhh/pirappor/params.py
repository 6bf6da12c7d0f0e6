"""PI-RAPPOR's parameters for one round: the field GF(q), the set S and the two rates.

Sources. Feldman and Talwar 2021, "Lossless Compression of Efficient Private Local Randomizers"
(arXiv 2102.12099, Section 4: PI-RAPPOR, Algorithm 3 the randomizer, Algorithms 4 and 5 the
decoders, Lemma 4.2 the estimator's law, Lemma 4.7 the case alpha_0 q not an integer), as the
OptPrefixTree paper's appendix "PI-RAPPOR" restates them for prefix domains.

Rates. A report is a vector v over GF(q) with v(x) in S with probability alpha_1 for the
device's element x, and in S with probability |S| / q for every other element (pairwise
independence of affine functions, Algorithm 3). The appendix's constants are

- replacement eps-DP: alpha_1 = 1/2, alpha_0 = 1/(e^eps + 1);
- deletion eps-DP: alpha_1 = 1 - alpha_0 = e^eps/(e^eps + 1), alpha_0 = 1/(e^eps + 1);

with S the alpha_0 q smallest field elements, which needs alpha_0 q to be an integer.

Field size (appendix, "Speedups ... for prefix based algorithms"): q is the smallest prime power
bigger than K = max(e^eps + 1, 2^segment). q > 2^segment gives every completion of a prefix
its own field element (``layout``); q > e^eps + 1
gives alpha_0 q > 1, so S is not empty. We follow the rule exactly, so q is a prime whenever the
smallest prime power above K is one (nearly always) and an extension field otherwise
(``field``). Primes would allow cheaper arithmetic, but the appendix fixes q, so we do not
substitute a larger prime.

alpha_0 q not an integer (Lemma 4.7 of the source; its text was not available to us, only the
appendix's statement that this case "incurs a small additional error", so what follows is our
own construction with its own proof). For a set S of m elements the rate for other elements is
a = m / q exactly. Given a, the randomizer is eps-DP exactly when

- replacement: alpha_1 (1 - a) / (a (1 - alpha_1)) <= e^eps (the largest likelihood ratio
  between two inputs: P[v | x] is alpha_1 / (m q^d) when v(x) is in S and
  (1 - alpha_1) / ((q - m) q^d) otherwise, Algorithm 3), i.e.
  alpha_1 <= e^eps a / (1 - a + e^eps a);
- deletion: e^-eps <= alpha_1 / a, (1 - alpha_1) / (1 - a) <= e^eps against the uniform
  reference report, i.e. alpha_1 <= min(e^eps a, 1 - e^-eps (1 - a)).

For fixed a the estimator's variance falls as alpha_1 rises, so alpha_1 is the largest
admissible value, rounded *down* to a multiple of 2^-32 (the coin is an integer comparison of
a uniform 32-bit word, as in ``fedhh.device.randomizer``; rounding down keeps both
inequalities). The per-report variance of an unused element's estimate is then

    V(a, alpha_1) = a (1 - a) / (alpha_1 - a)^2                                    (Lemma 4.2)

and m is the one of floor(alpha_0 q), ceil(alpha_0 q) with the smaller V. For replacement,
V(a) = (1 + (e^eps - 1) a)^2 / (a (1 - a) (e^eps - 1)^2), whose logarithmic derivative has the
sign of (e^eps + 1) a - 1: V falls up to a = alpha_0 and rises after it, so the better of the
two neighbours of alpha_0 q is the best m overall. When alpha_0 q is an integer this gives
exactly the appendix's constants (up to the 2^-32 rounding of alpha_1).

Extra error. The decoded counts have the law Bin(c, alpha_1) + Bin(n - c, a) (Lemma 4.2 with
these rates), so estimates stay unbiased and their variance is V(a, alpha_1) / V(alpha_0, 1/2)
times that of one-hot + randomized response at the same eps (``variance_inflation``): 1 when
alpha_0 q is an integer, largest when alpha_0 q is near sqrt(2), and falling like
1 / (alpha_0 q)^2 as alpha_0 q grows. On a grid of eps in [0.1, 20] (step 0.01) and segments of
1 to 30 bits it is at most 1.031 for eps >= 4 (the range OptPrefixTree runs at), 1.043 for
eps >= 1 and 1.091 for eps >= 0.1 (``tests/unit/pirappor/test_pirappor_params.py`` checks the
same bounds on a 0.05 grid, and that no other |S| does better); for small alpha_0
the worst case tends to 1 + (sqrt(2) - 1)^2 / (4 sqrt(2)) = 1.030. Rounding S up and keeping
alpha_1 = 1/2 instead would cost up to a factor 2 (alpha_0 q just above 1, e.g. eps = 8 with
segments up to 11 bits, where q = 2999 and alpha_0 q = 1.006).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, localcontext
from enum import StrEnum
from fractions import Fraction
from functools import cached_property, lru_cache

from fedhh.errors import ConfigError
from fedhh.pirappor.field import MAX_Q, Field, field, smallest_prime_power_above

WORD_BITS = 32
SCALE = 1 << WORD_BITS
_PRECISION = 80


class PiRapporVariant(StrEnum):
    REPLACEMENT = "replacement"
    DELETION = "deletion"


@dataclass(frozen=True)
class RoundParameters:
    """PI-RAPPOR for one round: eps, the segment length and variant, and what they imply."""

    eps: float
    segment_bits: int
    variant: PiRapporVariant
    q: int
    set_size: int      # |S|: S = {0, 1, ..., set_size - 1} (codes of the smallest elements)
    threshold1: int    # alpha_1 = threshold1 / 2^32

    @property
    def field(self) -> Field:
        return field(self.q)

    @property
    def a0(self) -> float:
        """Implemented P[v(w) in S] for an element w other than the device's (|S| / q)."""
        return self.set_size / self.q

    @property
    def a1(self) -> float:
        """Implemented P[v(x) in S] for the device's own element x."""
        return self.threshold1 / SCALE

    @property
    def exact_a0(self) -> Fraction:
        return Fraction(self.set_size, self.q)

    @property
    def exact_a1(self) -> Fraction:
        return Fraction(self.threshold1, SCALE)

    @cached_property
    def worst_log_ratio(self) -> float:
        """The implemented randomizer's exact privacy loss in its own variant's sense:
        replacement, max over two inputs; deletion, max against the uniform reference."""
        a, a1 = self.exact_a0, self.exact_a1
        if self.variant is PiRapporVariant.REPLACEMENT:
            return math.log(a1 * (1 - a) / (a * (1 - a1)))
        return max(math.log(a1 / a), math.log((1 - a) / (1 - a1)),
                   math.log(a / a1), math.log((1 - a1) / (1 - a)))

    @property
    def replacement_epsilon(self) -> float:
        """The largest log likelihood ratio between two inputs (what shuffling bounds use):
        eps for the replacement variant, about 2 eps for the deletion variant."""
        a, a1 = self.exact_a0, self.exact_a1
        return math.log(a1 * (1 - a) / (a * (1 - a1)))

    @property
    def variance_inflation(self) -> float:
        """Per-report variance of an unused element's estimate over that of one-hot +
        randomized response at the exact alpha_0 = 1/(e^eps + 1) (module docstring)."""
        return null_variance(self.a0, self.a1) / ideal_null_variance(self.eps)


def null_variance(a0: float, a1: float) -> float:
    """a0 (1 - a0) / (a1 - a0)^2: per-report variance of a zero-count element's estimate."""
    return a0 * (1 - a0) / (a1 - a0) ** 2


def ideal_null_variance(eps: float) -> float:
    """The same for alpha_0 = 1/(e^eps + 1), alpha_1 = 1/2 (and for the deletion constants):
    4 e^eps / (e^eps - 1)^2."""
    return 4 * math.exp(eps) / math.expm1(eps) ** 2


@lru_cache(maxsize=512)
def round_parameters(eps: float, segment_bits: int,
                     variant: PiRapporVariant = PiRapporVariant.REPLACEMENT) -> RoundParameters:
    """The parameters of a round whose domain completes each prefix with ``segment_bits``
    bits (module docstring: q by the appendix's rule, S and alpha_1 by our Lemma 4.7 rule)."""
    if not (isinstance(eps, float | int) and math.isfinite(eps) and eps > 0):
        raise ConfigError(f"eps_local must be a positive finite number, got {eps}")
    if not (isinstance(segment_bits, int) and 1 <= segment_bits <= 30):
        raise ConfigError(f"PI-RAPPOR needs a segment of 1 to 30 bits, got {segment_bits}")
    variant = PiRapporVariant(variant)
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        e = Decimal(eps).exp()
        bound = max(e + 1, Decimal(1 << segment_bits))
        if bound >= MAX_Q - 1:
            raise ConfigError(f"PI-RAPPOR at eps {eps} needs a field of more than 2^31 "
                              "elements; use eps_local below 21")
        q = smallest_prime_power_above(bound)
        if q >= MAX_Q:
            raise ConfigError(f"PI-RAPPOR needs a field of {q} >= 2^31 elements")
        ideal = Decimal(q) / (e + 1)  # alpha_0 q
        candidates = sorted({int(ideal.to_integral_value(rounding=ROUND_FLOOR)),
                             -int((-ideal).to_integral_value(rounding=ROUND_FLOOR))})
        best: tuple[float, int, int] | None = None
        for m in candidates:
            if not 1 <= m < q:
                continue
            threshold1 = _largest_threshold1(Decimal(m) / q, e, variant)
            a, a1 = m / q, threshold1 / SCALE
            if not a1 > a:
                continue
            option = (null_variance(a, a1), m, threshold1)
            if best is None or option < best:
                best = option
    if best is None:  # q > e^eps + 1 makes m = ceil(alpha_0 q) >= 1 admissible
        raise AssertionError(f"no admissible PI-RAPPOR set at eps {eps}, q {q}")
    params = RoundParameters(float(eps), segment_bits, variant, q, best[1], best[2])
    if params.worst_log_ratio > eps * (1 + 1e-12):
        raise AssertionError(f"PI-RAPPOR parameters exceed eps {eps}: {params}")
    return params


def _largest_threshold1(a: Decimal, e: Decimal, variant: PiRapporVariant) -> int:
    """floor(2^32 alpha_1) for the largest alpha_1 the variant admits at rate a."""
    if variant is PiRapporVariant.REPLACEMENT:
        alpha1 = e * a / (1 - a + e * a)
    else:
        alpha1 = min(e * a, 1 - (1 - a) / e)
    return min(int((alpha1 * SCALE).to_integral_value(rounding=ROUND_FLOOR)), SCALE - 1)
