"""Which reductions provably cover one-hot + asymmetric binary randomized response."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from fedhh.device import RandomizedResponse
from fedhh.errors import PrivacyError
from fedhh.privacy.randomizer_class import (
    abrr_probabilities,
    at_most_exp,
    covered_by_fmt21,
    covered_by_fmt23,
    implemented_probabilities,
    replacement_epsilon,
    replacement_ratio,
    stronger_clone_margin,
)


@pytest.mark.parametrize("eps", [0.5, 2.0, 8.0])
def test_replacement_epsilon_is_eps(eps: float) -> None:
    a0, a1 = abrr_probabilities(eps)
    assert replacement_epsilon(a0, a1) == pytest.approx(eps, rel=1e-12)
    assert covered_by_fmt21(eps)


@pytest.mark.parametrize("eps", [0.5, 2.0, 8.0])
def test_stronger_clone_condition_fails(eps: float) -> None:
    a0, a1 = abrr_probabilities(eps)
    expected = (math.exp(eps) + 1) / (2 * math.exp(eps))
    assert stronger_clone_margin(a0, a1, eps) == pytest.approx(expected, rel=1e-12)
    assert not covered_by_fmt23(eps)


def test_binary_rr_meets_stronger_condition() -> None:
    # symmetric binary randomized response on one bit (a1 = 1 - a0): the margin is exactly 1
    eps = 1.5
    a0 = 1 / (math.exp(eps) + 1)
    # two inputs only, every other report is one of them: worst case is x = x0 or x1
    r1 = (1 - a0) / a0
    assert (math.exp(eps) + 1) * 1.0 / (1.0 + r1) == pytest.approx(1.0)


@pytest.mark.parametrize("eps", [1.0, 7.3])
def test_implemented_randomizer_is_within_eps(eps: float) -> None:
    rr = RandomizedResponse(eps)
    assert replacement_epsilon(rr.a0, rr.a1) <= eps


# e to 70 decimals (OEIS A001113): the truncation is below e, one more unit in the last place above
E_70 = Fraction(27182818284590452353602874713526624977572470936999595749669676277240766, 10**70)


def test_at_most_exp_is_exact() -> None:
    # the two sides are 1e-70 apart: past the first 60-digit enclosure, so it must refine
    assert at_most_exp(E_70, 1.0)
    assert not at_most_exp(E_70 + Fraction(1, 10**70), 1.0)
    assert at_most_exp(Fraction(1), 5e-324) and not at_most_exp(Fraction(1), -5e-324)


@pytest.mark.parametrize("eps", [5e-324, 1e-20, 1e-12, 1e-9, 2.86e-7, 1e-4, 0.5, 22.18, 40.0])
def test_implemented_randomizer_is_covered_by_fmt21(eps: float) -> None:
    # the device's coins: a0 = m / 2^32 with m the smallest integer with m / 2^32 >= 1/(e^eps+1),
    # a1 = 1/2; the float check with a tolerance read eps <= 2.9e-7 (1e-9 here) as a violation
    a0, a1 = implemented_probabilities(eps)
    rr = RandomizedResponse(eps)
    assert (a0, a1) == (Fraction(rr.threshold0, 2**32), Fraction(1, 2))
    m = rr.threshold0
    assert replacement_ratio(a0, a1) == Fraction(2**32 - m, m)
    assert covered_by_fmt21(eps)


def test_fmt21_check_decides_on_the_implemented_ratio() -> None:
    # at eps = 1e-9, m = 2^31 - 1 and the implemented ratio (2^31 + 1)/(2^31 - 1) = e^{9.31e-10}:
    # inside e^{1e-9}, outside e^{9.3e-10}
    ratio = replacement_ratio(*implemented_probabilities(1e-9))
    assert ratio == Fraction(2**31 + 1, 2**31 - 1)
    assert at_most_exp(ratio, 1e-9) and not at_most_exp(ratio, 9.3e-10)


@pytest.mark.parametrize(("eps", "covered"), [
    (1e-20, True), (9.3e-10, True), (9.32e-10, False), (1.0, False), (22.87, False),
    (22.875, True),
])
def test_fmt23_condition_on_the_implemented_coins(eps: float, covered: bool) -> None:
    # the condition 2 (2^32 - m)/m - 1 <= e^eps holds only where the coins saturate: m = 2^31
    # below ln((2^31+1)/(2^31-1)) = 9.313e-10, m = 1 above ln(2^33 - 3) = 22.8739
    assert covered_by_fmt23(eps) is covered


def test_checks_refuse_a_bad_epsilon() -> None:
    with pytest.raises(PrivacyError, match="eps_local must be a positive finite number, got nan"):
        covered_by_fmt21(math.nan)
