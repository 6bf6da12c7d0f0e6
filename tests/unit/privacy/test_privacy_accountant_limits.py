"""The accountant refuses what it cannot compose, with a PrivacyError naming the value."""

from __future__ import annotations

import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy._checks import EPS_LOCAL_LIMIT, MAX_ACCOUNTED_ROUNDS, check_rounds
from fedhh.privacy.accountant import aggregate_epsilon

METHODS = ("sum", "clones", "closed-form", "paper")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("eps_local", [720.0, 1e6, 1e308])
def test_local_epsilon_without_a_finite_exponential_is_refused(method: str,
                                                                eps_local: float) -> None:
    # Before: OverflowError (shuffle methods) or decimal.Overflow (sum).
    with pytest.raises(PrivacyError, match="eps_local must be at most 700"):
        aggregate_epsilon(eps_local, 1e-6, 4, 1000, method=method)


@pytest.mark.parametrize("method", METHODS)
def test_absurd_round_counts_are_refused_before_anything_is_allocated(method: str) -> None:
    # Before: rounds = 10^9 built per-round lists of 10^9 floats (the process was killed).
    with pytest.raises(PrivacyError, match="rounds must be at most 1,048,576"):
        aggregate_epsilon(2.0, 1e-6, 10**9, 1000, method=method)


def test_limits_themselves_are_accepted() -> None:
    assert check_rounds(MAX_ACCOUNTED_ROUNDS) == MAX_ACCOUNTED_ROUNDS
    assert aggregate_epsilon(EPS_LOCAL_LIMIT, 1e-6, 2, 1000, method="closed-form").eps_agg \
        == pytest.approx(2 * EPS_LOCAL_LIMIT)
