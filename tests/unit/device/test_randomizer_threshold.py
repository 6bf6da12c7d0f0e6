"""The randomizer's a0 threshold is the exact ceiling of 2^32 / (e^eps + 1), checked against
rational bounds on e^eps at the doubles nearest the points where that ceiling steps."""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from fedhh.device import randomizer
from fedhh.device.randomizer import SCALE, a0_threshold

# Thresholds m whose step eps* = ln(2^32 / m - 1) is probed: the ends (1: eps 22.18,
# 2^31 - 1: eps 9.3e-10) and between.
STEPS = (1, 2, 3, 1000, 2**20 + 1, 1155094610, 2**30, 2**31 - 3, 2**31 - 1)


def exp_bounds(x: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """Rationals lo <= e^x <= hi (x >= 0): Taylor series of e^z at z = x / 2^r <= 1/2, whose
    tail after a term t is at most 2t (the next terms shrink by z <= 1/2 each), squared r
    times; every step rounded outwards to multiples of 2^-bits."""
    unit = Fraction(1, 1 << bits)
    r = 0
    while x / (1 << r) > Fraction(1, 2):
        r += 1
    z = x / (1 << r)
    total, term, k = Fraction(0), Fraction(1), 0
    while term >= unit**2:
        total += term
        k += 1
        term = term * z / k
    lo = math.floor(total / unit) * unit
    hi = math.ceil((total + 2 * term) / unit) * unit
    for _ in range(r):
        lo, hi = math.floor(lo * lo / unit) * unit, math.ceil(hi * hi / unit) * unit
    return lo, hi


def exact_threshold(eps: float) -> int:
    """max(1, ceil(2^32 / (e^eps + 1))), certified: m (lo + 1) >= 2^32 > (m - 1)(hi + 1)."""
    for bits in (128, 256, 512, 1024):
        lo, hi = exp_bounds(Fraction(eps), bits)
        m = math.ceil(SCALE / (lo + 1))  # an upper bound of the ceiling
        if (m - 1) * (hi + 1) < SCALE:
            return max(m, 1)
    raise AssertionError(f"e^{eps!r} not settled at 1024 bits")


def edge_epsilons() -> Iterator[tuple[int, float]]:
    """For each step m: the double nearest eps* and its two neighbours either side."""
    for m in STEPS:
        with localcontext() as ctx:
            ctx.prec = 60
            nearest = float((Decimal(SCALE) / m - 1).ln())
        below = math.nextafter(math.nextafter(nearest, 0.0), 0.0)
        points = [below]
        for _ in range(4):
            points.append(math.nextafter(points[-1], math.inf))
        yield from ((m, eps) for eps in points)


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    a0_threshold.cache_clear()
    yield
    a0_threshold.cache_clear()


def test_the_threshold_is_the_exact_ceiling_on_both_sides_of_each_step(fresh_cache: None
                                                                       ) -> None:
    sides: dict[int, set[int]] = {}
    for m, eps in edge_epsilons():
        exact = exact_threshold(eps)
        assert a0_threshold(eps) == exact, (m, eps)
        sides.setdefault(m, set()).add(exact)
    # each probe straddles its step: m above eps*, m + 1 below it (1 and 2 for m = 1)
    assert all(found == {m, m + 1} for m, found in sides.items()), sides


def test_a_threshold_the_first_precision_cannot_settle_is_refined(
        fresh_cache: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # (before, the 120-digit value was rounded up unchecked; at 12 digits the same unchecked
    # rounding is wrong next to a step, where 2^32 / (e^eps + 1) is within ~1e-6 of m)
    monkeypatch.setattr(randomizer, "START_DIGITS", 12)
    unsettled = 0
    for _, eps in edge_epsilons():
        unsettled += randomizer._threshold_at(eps, 12) is None
        assert a0_threshold(eps) == exact_threshold(eps), eps
    assert unsettled >= len(STEPS)
