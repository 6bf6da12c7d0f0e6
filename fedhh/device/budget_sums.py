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
from decimal import ROUND_DOWN, Context, Decimal, Inexact
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


def exceeds_in_words(charges: Iterable[float], cap: float) -> str:
    """Why finite ``charges`` exceed ``cap`` (``exceeds``), in figures a user can check: their
    exact sum and by how much it is above the cap, and, where their float sum reads as within
    it, a charge's binary value (a refusal of ten charges of 0.1 under a cap of 1.0 that showed
    only their float sum, 0.9999999999999999, left the user guessing why)."""
    values = [float(v) for v in charges]
    total = exact_sum(values)
    words = (f"their exact sum, {_decimal(total)}, is above the cap {cap!r} by "
             f"{float(total - Fraction(cap)):.4g}")
    inexact = next((v for v in values if Fraction(v) != Fraction(repr(v))), None)
    if inexact is not None and math.fsum(values) <= cap:
        words += (f" (a charge is the binary value of its double: {inexact!r} is "
                  f"{_decimal(Fraction(inexact))})")
    return words


def _decimal(value: Fraction, digits: int = 34) -> str:
    """``value`` to ``digits`` significant digits, cut towards zero, '...' where cut."""
    context = Context(prec=digits, rounding=ROUND_DOWN, Emin=-99999, Emax=99999)
    shown = context.divide(Decimal(value.numerator), Decimal(value.denominator))
    text = str(shown)
    return text + ("..." if context.flags[Inexact] else "")
