"""The accountant refuses what it cannot compose, with a PrivacyError naming the value."""

from __future__ import annotations

import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy._checks import EPS_LOCAL_LIMIT, MAX_ACCOUNTED_ROUNDS, check_rounds
from fedhh.privacy.accountant import aggregate_epsilon
from fedhh.privacy.shuffle import closed_form_epsilon

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


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("delta", [1e-308, 5e-324])
def test_a_delta_near_the_smallest_float_composes(method: str, delta: float) -> None:
    """Before, closed-form raised ValueError (log of 0: 2/delta overflows below ~1.1e-308) or
    ZeroDivisionError (a per-round share of 5e-324 rounds to 0): `fedhh privacy`, `fedhh
    simulate --privacy-method closed-form --delta 1e-308` and StartRun (INTERNAL) failed."""
    eps = aggregate_epsilon(2.0, delta, 4, 10**8, method=method).eps_agg
    assert 0.0 < eps <= 4 * 2.0


def test_the_closed_form_is_continuous_down_to_the_smallest_delta() -> None:
    deltas = [1e-300, 1e-307, 1.2e-308, 1e-308, 5e-324]
    amplified = [closed_form_epsilon(1.0, 10**12, d) for d in deltas]
    assert amplified == sorted(amplified) and amplified[-1] < 2 * amplified[0] < 1.0
    assert closed_form_epsilon(1.0, 10**12, 0.0) == 1.0  # (delta 0: no amplification)
