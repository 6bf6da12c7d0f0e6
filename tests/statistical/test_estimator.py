"""The frequency estimator: unbiased, with the variance the thresholds assume.

Sums are drawn from their exact law (Bin(c, a1) + Bin(n - c, a0)); the mean test is a z-test
on m = 200,000 draws at |z| < 5.33 (two-sided false failure 1e-7); the variance test compares the
sample variance with the formula through its chi-square law at the same level.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedhh.device import RandomizedResponse
from fedhh.server.estimate import (
    BinomialTail,
    GaussianTail,
    LaplaceTail,
    rr_estimate,
    rr_null_std,
    rr_std_upper,
    rr_variance,
)

Z = 5.33
M = 200_000


@pytest.mark.parametrize("eps,n,c", [(1.0, 10_000, 0), (4.0, 10_000, 300), (8.0, 1_600_000, 50)])
def test_unbiased_and_variance_matches(eps: float, n: int, c: int) -> None:
    rr = RandomizedResponse(eps)
    rng = np.random.default_rng(11)
    sums = rng.binomial(c, rr.a1, size=M) + rng.binomial(n - c, rr.a0, size=M)
    est = rr_estimate(sums, n, rr)
    var = float(rr_variance(c, n, rr))
    assert abs(est.mean() - c) < Z * math.sqrt(var / M)
    sample_var = est.var(ddof=1)
    lo = stats.chi2.ppf(5e-8, M - 1) * var / (M - 1)
    hi = stats.chi2.isf(5e-8, M - 1) * var / (M - 1)
    assert lo < sample_var < hi
    if c == 0:
        assert math.isclose(math.sqrt(var), rr_null_std(n, rr))
    assert math.sqrt(var) <= rr_std_upper(n, rr)


def test_binomial_tail_is_exact_on_the_lattice() -> None:
    rr = RandomizedResponse(3.0)
    n = 2000
    tail = BinomialTail(n, rr)
    for p in (0.1, 1e-3, 1e-6):
        x = tail.isf(p)
        assert tail.sf(x) <= p
        # the next lower lattice point has a larger tail than p
        assert tail.sf(x - 1 / (rr.a1 - rr.a0)) > p


def test_binomial_tail_counts_what_the_threshold_keeps() -> None:
    """At the estimate of a sum k the tail is P[S > k], and one ulp below it P[S > k - 1]:
    estimate > x is decided between the estimates themselves, as the threshold decides it.
    (Mapping x back to a sum in floating point landed one lattice point low for ~1 point in
    120 of these: 40 random points of each of 200 random (eps, n).)"""
    rng = np.random.default_rng(5)
    for _ in range(200):
        rr = RandomizedResponse(float(rng.uniform(0.5, 8.0)))
        n = int(rng.integers(100, 2_000_000))
        tail = BinomialTail(n, rr)
        for k in rng.integers(0, n, size=40).tolist():
            x = float(rr_estimate(np.array([k]), n, rr)[0])
            assert tail.sf(x) == stats.binom.sf(k, n, rr.a0)
            assert tail.sf(math.nextafter(x, -math.inf)) == stats.binom.sf(k - 1, n, rr.a0)
        for p in (0.3, 1e-3, 1e-7):
            assert tail.sf(tail.isf(p)) <= p
    assert BinomialTail(100, RandomizedResponse(1.0)).sf(math.inf) == 0.0


@pytest.mark.parametrize("tail", [GaussianTail(2.0), LaplaceTail(1.5)])
def test_continuous_tails_invert(tail) -> None:
    for p in (0.3, 1e-4, 1e-9):
        assert math.isclose(tail.sf(tail.isf(p)), p, rel_tol=1e-9)
