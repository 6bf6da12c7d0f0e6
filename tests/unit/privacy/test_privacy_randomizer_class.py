"""Which reductions provably cover one-hot + asymmetric binary randomized response."""

from __future__ import annotations

import math

import pytest

from fedhh.device import RandomizedResponse
from fedhh.privacy.randomizer_class import (
    abrr_probabilities,
    covered_by_fmt21,
    covered_by_fmt23,
    replacement_epsilon,
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
