"""Budgets compared exactly: a sum of doubles against a cap, in rational arithmetic.

A budget that composes by adding (basic composition, Dwork and Roth, *The Algorithmic
Foundations of Differential Privacy*, 2014, Theorem 3.16: mechanisms that are (eps_i, delta_i)-DP
are together (sum eps_i, sum delta_i)-DP) is kept when the sum of its charges is at most its cap.
Every finite double is a dyadic rational, so that sum and the comparison are taken exactly
(``Fraction``), with no tolerance: the charges are the binary values the mechanisms run at
(``fedhh.device.randomizer`` is eps-LDP at the double it is given), and a float sum, rounded to
nearest, can land below the exact one (ten charges of 0.1 add up in floats to
0.9999999999999999, exactly to 1.0000000000000000555; the tenth is refused under a cap of 1.0).
Before, each tier compared a float sum with the cap times 1 + 1e-9, letting a sum overshoot it.

Here, not in fedhh.privacy: the device process (``fedhh_device.budget``) uses it and may not
load the accountants (tests/unit/test_layers.py). clients/web/src/budget.ts has the same rule.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction


def exact_sum(values: Iterable[float]) -> Fraction:
    """The exact sum of finite doubles (equal values counted once, then multiplied)."""
    counts = Counter(float(v) for v in values)
    return sum((Fraction(v) * k for v, k in counts.items()), Fraction(0))


def exceeds(charges: Iterable[float], cap: float) -> bool:
    """True when the exact sum of ``charges`` is above ``cap`` (Theorem 3.16: the charges are
    within the cap exactly when their sum is at most it). A charge that is not finite (inf,
    NaN) fits no cap, and every finite sum fits an infinite one."""
    values = [float(v) for v in charges]
    cap = float(cap)
    if not all(math.isfinite(v) for v in values) or math.isnan(cap):
        return True
    if cap == math.inf:
        return False
    return exact_sum(values) > Fraction(cap)
