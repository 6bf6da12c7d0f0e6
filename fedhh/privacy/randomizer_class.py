"""Which shuffle bounds provably cover our randomizer (one-hot + asymmetric binary RR).

Our device report (``fedhh.device.randomizer``): the one-hot vector of the selected element over the
round's domain, every coordinate flipped independently, P[1 -> 1] = a1 = 1/2 and
P[0 -> 1] = a0 = 1/(e^eps + 1); a device with nothing to report sends the all-zeros vector
randomized the same way (the special element "bottom"). Relative to the report of bottom,
B(y) = prod_j a0^{y_j} (1 - a0)^{1 - y_j}, the report of element v has likelihood ratio
r_v(y) = a1/a0 if y_v = 1 and (1 - a1)/(1 - a0) if y_v = 0; r_bottom = 1. Distinct elements
use distinct coordinates, so their ratios can be chosen independently by the output y.

Two conditions are checked here:

* FMT21 (Hiding Among the Clones, Section 3): the randomizer must be eps0-DP for every pair of
  inputs (replacement, bottom included). ``replacement_epsilon`` computes the exact worst log
  ratio; for our parameters it equals eps exactly: (a1/a0) (1-a0)/(1-a1) = (1-a0)/a0 = e^eps.
* FMT23 (Stronger Amplification, Lemma 3.5 with its errata): the clone probability
  2/(e^eps0 + 1) comes from writing R(x0) = w Q0 + (1-w) Q1, R(x1) = (1-w) Q0 + w Q1 with
  w = e^eps0/(e^eps0 + 1), and every other report R(x) = (Q0 + Q1)/(e^eps0 + 1) + (rest).
  Adding the first two identities gives Q0 + Q1 = R(x0) + R(x1), so a necessary condition is
  R(x)(y) >= (R(x0)(y) + R(x1)(y)) / (e^eps0 + 1) for all x, x0, x1, y.
  ``stronger_clone_margin`` returns min over inputs/outputs of the ratio of the two sides; it
  is (e^eps + 1)/(2 e^eps) < 1 for our randomizer (three distinct elements, y set on x0 and
  x1 and clear on x), so that reduction is NOT established for it. The errata says the class
  contains "several important local randomizers"; ours is not shown to be one of them.
"""

from __future__ import annotations

import itertools
import math

from fedhh.privacy._checks import check_eps


def abrr_probabilities(eps: float) -> tuple[float, float]:
    """(a0, a1) of asymmetric binary randomized response at local epsilon ``eps``."""
    check_eps(eps, "eps_local")
    return 1.0 / (math.exp(eps) + 1.0), 0.5


def _ratio_choices(a0: float, a1: float, kind: str) -> tuple[float, ...]:
    """Possible likelihood ratios r(y) of an input relative to bottom's report."""
    if kind == "bottom":
        return (1.0,)
    return (a1 / a0, (1.0 - a1) / (1.0 - a0))


def replacement_epsilon(a0: float, a1: float) -> float:
    """Exact worst-case |log P(y|x) / P(y|x')| over pairs of inputs (elements and bottom)."""
    worst = 0.0
    for kind_x, kind_y in (("item", "item"), ("item", "bottom")):
        for rx in _ratio_choices(a0, a1, kind_x):
            for ry in _ratio_choices(a0, a1, kind_y):
                worst = max(worst, abs(math.log(rx / ry)))
    return worst


def stronger_clone_margin(a0: float, a1: float, eps0: float) -> float:
    """min over x, x0 != x1 and y of (e^eps0 + 1) R(x)(y) / (R(x0)(y) + R(x1)(y)).

    The FMT23 decomposition needs this to be >= 1. Inputs range over three distinct elements
    and bottom; ratios of distinct elements are chosen independently (distinct coordinates).
    """
    scale = math.exp(eps0) + 1.0
    worst = math.inf
    kinds = ("item", "bottom")
    for kx, k0, k1 in itertools.product(kinds, repeat=3):
        if [kx, k0, k1].count("bottom") > 1:
            continue  # bottom is a single input value: at most one of the three
        for rx, r0, r1 in itertools.product(
            _ratio_choices(a0, a1, kx), _ratio_choices(a0, a1, k0), _ratio_choices(a0, a1, k1)
        ):
            worst = min(worst, scale * rx / (r0 + r1))
    return worst


def covered_by_fmt21(eps: float, tolerance: float = 1e-9) -> bool:
    """Our randomizer at ``eps`` is eps-LDP under replacement (bottom included)."""
    a0, a1 = abrr_probabilities(eps)
    return replacement_epsilon(a0, a1) <= eps * (1.0 + tolerance)


def covered_by_fmt23(eps: float) -> bool:
    """The necessary condition of the stronger-clone decomposition holds (it never does here)."""
    a0, a1 = abrr_probabilities(eps)
    return stronger_clone_margin(a0, a1, eps) >= 1.0
