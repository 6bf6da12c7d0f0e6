"""Which shuffle bounds provably cover our randomizer (one-hot + asymmetric binary RR).

Our device report (``fedhh.device.randomizer``): the one-hot vector of the selected element over the
round's domain, every coordinate flipped independently, P[1 -> 1] = a1 = 1/2 and
P[0 -> 1] = a0 = 1/(e^eps + 1); a device with nothing to report sends the all-zeros vector
randomized the same way (the special element "bottom"). Relative to the report of bottom,
B(y) = prod_j a0^{y_j} (1 - a0)^{1 - y_j}, the report of element v has likelihood ratio
r_v(y) = a1/a0 if y_v = 1 and (1 - a1)/(1 - a0) if y_v = 0; r_bottom = 1. Distinct elements
use distinct coordinates, so their ratios can be chosen independently by the output y.

Both conditions are checked on the coins the device draws, a0 = m / 2^32 (m the smallest
integer with m / 2^32 >= 1/(e^eps + 1)) and a1 = 2^31 / 2^32, in exact rational arithmetic,
against an enclosure of e^eps (``at_most_exp``): no floating-point tolerance.

* FMT21 (Hiding Among the Clones, Section 3): the randomizer must be eps0-DP for every pair of
  inputs (replacement, bottom included). ``replacement_ratio`` is the exact worst likelihood
  ratio; for our coins it is (a1/a0) (1-a0)/(1-a1) = (1-a0)/a0 = (2^32 - m)/m, at most e^eps
  because a0 >= 1/(e^eps + 1) (``covered_by_fmt21``).
* FMT23 (Stronger Amplification, Lemma 3.5 with its errata): the clone probability
  2/(e^eps0 + 1) comes from writing R(x0) = w Q0 + (1-w) Q1, R(x1) = (1-w) Q0 + w Q1 with
  w = e^eps0/(e^eps0 + 1), and every other report R(x) = (Q0 + Q1)/(e^eps0 + 1) + (rest).
  Adding the first two identities gives Q0 + Q1 = R(x0) + R(x1), so a necessary condition is
  R(x)(y) >= (R(x0)(y) + R(x1)(y)) / (e^eps0 + 1) for all x, x0, x1, y, i.e.
  ``stronger_clone_ratio`` (the max of (R(x0) + R(x1))/R(x)) <= e^eps0 + 1. For our coins
  that ratio is 2 (1-a0)/a0, about 2 e^eps (three distinct elements, y set on x0 and x1 and
  clear on x), so that reduction is NOT established for it. The condition holds only at the
  ends, where the coins saturate: below eps = ln((2^31 + 1)/(2^31 - 1)) ~ 9.3e-10 (m = 2^31,
  a0 = a1: a report is independent of its input) and above ln(2^33 - 3) ~ 22.87 (m = 1, and
  the randomizer is ln(2^32 - 1) ~ 22.18-DP, well inside eps); being only necessary, it
  establishes nothing there either. The errata says the class contains "several important
  local randomizers"; ours is not shown to be one of them.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

from fedhh.device.randomizer import A1_THRESHOLD, SCALE, a0_threshold
from fedhh.privacy._checks import check_eps

# Decimal digits of the first enclosure of e^eps in ``at_most_exp``, and the most it refines to
# (it doubles). The implemented ratio differs from e^eps by about 2^-32 relative, so the first
# one decides every case met so far.
EXP_DIGITS = 60
EXP_DIGITS_MAX = 3840


def abrr_probabilities(eps: float) -> tuple[float, float]:
    """(a0, a1) of asymmetric binary randomized response at local epsilon ``eps``, as reals
    (the device rounds a0 up to a multiple of 2^-32: ``implemented_probabilities``)."""
    check_eps(eps, "eps_local")
    return 1.0 / (math.exp(eps) + 1.0), 0.5


def implemented_probabilities(eps: float) -> tuple[Fraction, Fraction]:
    """(a0, a1) exactly as the device draws them: m / 2^32 and 2^31 / 2^32
    (``fedhh.device.randomizer``: a coin is 1 when a uniform 32-bit word is below the
    threshold)."""
    check_eps(eps, "eps_local")
    return Fraction(a0_threshold(eps), SCALE), Fraction(A1_THRESHOLD, SCALE)


def at_most_exp(ratio: Fraction, eps: float) -> bool:
    """Whether ``ratio <= e^eps``, decided exactly.

    A double eps is a rational number, and e^q is irrational for every rational q != 0
    (Lindemann 1882; the Hermite-Lindemann theorem), so ratio != e^eps and a fine enough
    enclosure of e^eps decides the comparison. Decimal's ``exp`` is correctly rounded (the
    General Decimal Arithmetic Specification, which Python's decimal implements), so at
    precision P the result E is within half a unit in its last place u = 10^(adjusted(E) - P + 1)
    of e^eps; the enclosure [E - u, E + u] is compared with ratio in exact rational arithmetic.
    P doubles from ``EXP_DIGITS`` until the enclosure excludes the ratio; a case still
    undecided at ``EXP_DIGITS_MAX`` digits reads False (the safe side: unverified)."""
    digits = EXP_DIGITS
    while digits <= EXP_DIGITS_MAX:
        with localcontext() as ctx:
            ctx.prec = digits
            approx = Decimal(eps).exp()
        ulp = Fraction(10) ** (approx.adjusted() - digits + 1)
        if ratio <= Fraction(approx) - ulp:
            return True
        if ratio >= Fraction(approx) + ulp:
            return False
        digits *= 2
    return False


def _ratio_choices(a0: Fraction, a1: Fraction, kind: str) -> tuple[Fraction, ...]:
    """Possible likelihood ratios r(y) of an input relative to bottom's report."""
    if kind == "bottom":
        return (Fraction(1),)
    return (a1 / a0, (1 - a1) / (1 - a0))


def replacement_ratio(a0: Fraction, a1: Fraction) -> Fraction:
    """Exact worst-case P(y|x) / P(y|x') over pairs of inputs (elements and bottom)."""
    worst = Fraction(1)
    for kind_x, kind_y in (("item", "item"), ("item", "bottom")):
        for rx in _ratio_choices(a0, a1, kind_x):
            for ry in _ratio_choices(a0, a1, kind_y):
                worst = max(worst, rx / ry, ry / rx)
    return worst


def replacement_epsilon(a0: float, a1: float) -> float:
    """log of ``replacement_ratio`` at (a0, a1), each taken exactly (a double is a rational)."""
    return math.log(replacement_ratio(Fraction(a0), Fraction(a1)))


def stronger_clone_ratio(a0: Fraction, a1: Fraction) -> Fraction:
    """max over x, x0 != x1 and y of (R(x0)(y) + R(x1)(y)) / R(x)(y), exactly.

    The FMT23 decomposition needs it to be at most e^eps0 + 1. Inputs range over three distinct
    elements and bottom; ratios of distinct elements are chosen independently (distinct
    coordinates).
    """
    worst = Fraction(0)
    kinds = ("item", "bottom")
    for kx, k0, k1 in itertools.product(kinds, repeat=3):
        if [kx, k0, k1].count("bottom") > 1:
            continue  # bottom is a single input value: at most one of the three
        for rx, r0, r1 in itertools.product(
            _ratio_choices(a0, a1, kx), _ratio_choices(a0, a1, k0), _ratio_choices(a0, a1, k1)
        ):
            worst = max(worst, (r0 + r1) / rx)
    return worst


def stronger_clone_margin(a0: float, a1: float, eps0: float) -> float:
    """min over x, x0 != x1 and y of (e^eps0 + 1) R(x)(y) / (R(x0)(y) + R(x1)(y)): the FMT23
    decomposition needs it to be >= 1 (``stronger_clone_ratio``; for reporting)."""
    return (math.exp(eps0) + 1.0) / float(stronger_clone_ratio(Fraction(a0), Fraction(a1)))


def covered_by_fmt21(eps: float) -> bool:
    """The device's randomizer at ``eps`` is eps-LDP under replacement (bottom included), the
    premise of FMT21 Section 3: ``replacement_ratio`` of the implemented coins <= e^eps,
    decided exactly (``at_most_exp``)."""
    return at_most_exp(replacement_ratio(*implemented_probabilities(eps)), eps)


def covered_by_fmt23(eps: float) -> bool:
    """The necessary condition of the stronger-clone decomposition holds for the device's
    randomizer: ``stronger_clone_ratio`` - 1 <= e^eps, decided exactly (it fails except where
    the coins saturate; module docstring)."""
    return at_most_exp(stronger_clone_ratio(*implemented_probabilities(eps)) - 1, eps)
