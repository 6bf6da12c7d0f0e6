"""Connect the dots: against dp-accounting's implementation, and robust to rounding noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import pld_pmf

from fedhh.privacy import dots, sum_pld
from fedhh.privacy.central import gaussian_delta

UNIT = 1e-3


def gaussian_profile(eps: np.ndarray, multiplier: float) -> np.ndarray:
    return np.array([gaussian_delta(float(e), multiplier) for e in eps])


def profile_of(pmf: pld_pmf.PLDPmf, eps: np.ndarray) -> np.ndarray:
    return np.asarray(pmf.get_delta_for_epsilon(np.sort(eps)))


def test_matches_dp_accounting_on_a_convex_profile() -> None:
    points = dots.grid(-3.0, 3.0, 0.01, UNIT)
    values = gaussian_profile(points * UNIT, 1.5)
    ours = dots.connect_dots(points, values, UNIT)
    theirs = pld_pmf.create_pmf_pessimistic_connect_dots(UNIT, points, values)
    eps = np.linspace(-4.0, 4.0, 161)
    assert np.max(np.abs(profile_of(ours, eps) - profile_of(theirs, eps))) < 1e-12
    assert np.all(profile_of(ours, points * UNIT) >= values - 1e-15)


def test_noisy_values_still_give_a_probability_measure() -> None:
    # rounding-level noise breaks convexity; the result must stay a pair dominating the values
    rng = np.random.default_rng(7)
    points = dots.grid(-3.0, 3.0, 0.005, UNIT)
    exact = gaussian_profile(points * UNIT, 0.8)
    values = exact + rng.uniform(0.0, 1e-12, exact.shape)  # upper bounds with noise
    pmf = dots.connect_dots(points, values, UNIT)
    total = float(pmf.get_delta_for_epsilon(-80.0))
    low = -5.0
    other = (total - float(pmf.get_delta_for_epsilon(low))) / math.exp(low)
    assert total == pytest.approx(1.0, abs=1e-14) and other <= 1.0 + 1e-14
    assert np.all(profile_of(pmf, points * UNIT) >= values - 1e-15)
    # between and beyond the points the profile stays above the true (convex) one
    eps = np.linspace(-6.0, 6.0, 241)
    assert np.all(profile_of(pmf, eps) >= gaussian_profile(eps, 0.8) - 1e-15)


def test_the_sampled_round_case() -> None:
    # The profile of a sampled round (delta sums of dp-accounting, nearly linear for eps < 0):
    # dp-accounting's connect-the-dots clips negative masses and its total exceeds 1 by far
    # more than rounding; ours is a probability measure dominating the values.
    base = sum_pld.round_pld(7.0, 50_000)
    points = dots.grid(-0.9, 0.9, 1e-3, sum_pld.DISCRETIZATION)
    values = sum_pld.sampled_profile(base, 0.5, points * sum_pld.DISCRETIZATION)
    clipped = pld_pmf.create_pmf_pessimistic_connect_dots(
        sum_pld.DISCRETIZATION, points, np.minimum.accumulate(values))
    assert float(clipped.get_delta_for_epsilon(-80.0)) > 1.0 + 1e-9
    ours = dots.connect_dots(points, values, sum_pld.DISCRETIZATION)
    assert float(ours.get_delta_for_epsilon(-80.0)) == pytest.approx(1.0, abs=1e-14)
    assert np.all(profile_of(ours, points * sum_pld.DISCRETIZATION) >= values - 1e-15)


def test_bad_points_are_refused() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        dots.connect_dots(np.array([3, 3]), np.array([0.5, 0.4]), UNIT)
    with pytest.raises(ValueError, match="strictly increasing"):
        dots.connect_dots(np.array([], dtype=np.int64), np.array([]), UNIT)


def test_grid_is_dense_near_zero_and_covers_the_range() -> None:
    points = dots.grid(-0.7, 7.5, 5e-4, 1e-4)
    assert np.all(np.diff(points) > 0)
    assert points[0] * 1e-4 <= -0.7 and points[-1] * 1e-4 >= 7.5
    gaps = np.diff(points)
    assert gaps[np.searchsorted(points, 0)] == 5 and gaps.max() > 200
