"""TrieHH / TrieHH++ sampling rates: hand constants and the theorems' conditions."""

from __future__ import annotations

import math

import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy import triehh_sampling_rate, triehhpp_sampling_rate
from fedhh.privacy.baselines import triehh_delta, triehhpp_alpha, triehhpp_rate


def test_triehh_hand_constant() -> None:
    rate = triehh_sampling_rate(10, 1_600_000, 4, 1.0, 1e-6)
    assert rate == pytest.approx((1 - math.exp(-0.25)) / 10, rel=1e-12)
    assert rate == pytest.approx(0.0221199, abs=1e-7)
    assert triehh_delta(10) == pytest.approx(8 / (7 * math.factorial(10)), rel=1e-12)


def test_triehh_refuses_small_theta_for_delta() -> None:
    with pytest.raises(PrivacyError, match="theta=8"):
        triehh_sampling_rate(8, 1_600_000, 4, 1.0, 1e-6)


def test_triehhpp_alpha_meets_delta() -> None:
    for theta in (10, 15, 20):
        alpha = triehhpp_alpha(theta, 2.5e-7)
        c_alpha = math.log(1 / alpha) - 1 / (1 + alpha)
        assert math.exp(-c_alpha * theta) <= 2.5e-7 * (1 + 1e-9)
        assert math.exp(-c_alpha * theta) == pytest.approx(2.5e-7, rel=1e-6)


def test_triehhpp_hand_constant_and_even_split() -> None:
    rate = triehhpp_rate(10, 4, 1.0, 1e-6)
    assert rate.per_round_delta == pytest.approx(2.5e-7)
    assert rate.per_round_epsilon == pytest.approx(0.25)
    assert rate.sampling_rate == pytest.approx(rate.alpha * (1 - math.exp(-0.25)), rel=1e-12)
    assert rate.sampling_rate == pytest.approx(0.019280, abs=1e-6)


def test_rates_monotone_in_theta() -> None:
    pp = [triehhpp_sampling_rate(t, 4, 1.0, 1e-6) for t in range(10, 21)]
    hh = [triehh_sampling_rate(t, 1_600_000, 4, 1.0, 1e-6) for t in range(10, 21)]
    assert pp == sorted(pp)
    assert hh == sorted(hh, reverse=True)


def test_triehhpp_needs_per_round_eps_below_one() -> None:
    with pytest.raises(PrivacyError, match="eps < 1"):
        triehhpp_sampling_rate(10, 1, 1.0, 1e-6)


def test_triehhpp_alpha_far_below_1e_150() -> None:
    # theta = 1 with a small delta puts alpha near delta / e: the bisection on alpha multiplied
    # two alphas, which underflowed to 0, and math.log(0) raised 'math domain error' (at
    # delta 1e-250 and below). Bisected in ln(alpha) now; the double returned meets the delta.
    for theta, delta in ((1, 1e-250), (1, 1e-300), (2, 1e-300)):
        alpha = triehhpp_alpha(theta, delta)
        assert 0 < alpha < 1e-150
        assert -math.log(alpha) - 1 / (1 + alpha) >= -math.log(delta) / theta
        assert alpha == pytest.approx(delta ** (1 / theta) / math.e, rel=1e-9)
    assert triehhpp_rate(1, 4, 1.0, 1e-300).sampling_rate > 0


def test_triehhpp_refuses_an_alpha_or_delta_that_underflows() -> None:
    # (both raised ValueError('math domain error'), the CLI a traceback)
    with pytest.raises(PrivacyError, match="below the smallest positive double"):
        triehhpp_alpha(1, 1e-323)
    with pytest.raises(PrivacyError, match="delta / T underflows"):
        triehhpp_rate(1, 4, 1.0, 5e-324)
