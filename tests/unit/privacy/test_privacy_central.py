"""Central Laplace/Gaussian calibration against hand formulas and dp_accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from fedhh.privacy import central_gaussian_sigma, central_laplace_scale
from fedhh.privacy.central import gaussian_calibration, gaussian_delta, laplace_calibration
from fedhh.privacy.composition import ORDERS, rdp_to_dp


def mironov_laplace(order: float, b: float) -> float:
    """Mironov 2017 Table 2, Laplace with scale b and sensitivity 1."""
    a = order
    return math.log(
        a / (2 * a - 1) * math.exp((a - 1) / b) + (a - 1) / (2 * a - 1) * math.exp(-a / b)
    ) / (a - 1)


def test_laplace_one_round_is_pure_dp() -> None:
    assert central_laplace_scale(1.0, 1e-6, 1, 1.0) == pytest.approx(1.0)
    assert central_laplace_scale(0.5, 1e-6, 1, 2.0) == pytest.approx(4.0)


def test_laplace_rdp_matches_mironov_table() -> None:
    cal = laplace_calibration(1.0, 1e-6, 20, 1.0)
    b = cal.rdp_noise_scale
    ours = rdp_to_dp(
        np.asarray(ORDERS), 20 * np.array([mironov_laplace(a, b) for a in ORDERS]), 1e-6
    )
    assert ours.epsilon == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize(("eps", "rounds"), [(1.0, 1), (1.0, 4), (0.5, 12), (2.0, 3)])
def test_gaussian_is_exact_against_the_pld_accountant(eps: float, rounds: int) -> None:
    # dp_accounting's PLD accountant (pessimistic, connect-the-dots) is an independent route:
    # at our sigma it meets the target, 0.2% less noise misses it.
    sigma = central_gaussian_sigma(eps, 1e-6, rounds, 1.0)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.GaussianDpEvent(sigma), rounds)
    assert acc.get_epsilon(1e-6) <= eps * (1 + 1e-3)
    low = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    low.compose(dp_event.GaussianDpEvent(0.998 * sigma), rounds)
    assert low.get_epsilon(1e-6) > eps


def test_gaussian_issue_figure_and_rdp_is_looser() -> None:
    # issue 12: sqrt(T) sigma_aGM = 8.449 at T = 4; RDP composition needed 9.097
    sigma = central_gaussian_sigma(1.0, 1e-6, 4, 1.0)
    assert sigma == pytest.approx(8.449, abs=1e-3)
    orders = np.asarray(ORDERS)
    rdp = rdp_to_dp(orders, 4 * orders / (2 * sigma * sigma), 1e-6).epsilon
    assert rdp > 1.05  # the RDP bound at the exact sigma overshoots the target


def test_gaussian_one_round_is_analytic_gaussian() -> None:
    cal = gaussian_calibration(1.0, 1e-6, 1, 1.0)
    assert cal.tightest == "exact"
    assert gaussian_delta(1.0, cal.noise_scale) <= 1e-6
    assert gaussian_delta(1.0, cal.noise_scale * 0.999) > 1e-6


def test_gaussian_delta_matches_scipy() -> None:
    from scipy.stats import norm

    for eps, z in ((0.5, 3.0), (1.0, 4.2), (2.0, 1.1)):
        ref = norm.cdf(0.5 / z - eps * z) - math.exp(eps) * norm.cdf(-0.5 / z - eps * z)
        assert gaussian_delta(eps, z) == pytest.approx(ref, rel=1e-9, abs=1e-15)


def test_sensitivity_scales_linearly() -> None:
    assert central_gaussian_sigma(0.5, 1e-6, 3, 2.5) == pytest.approx(
        2.5 * central_gaussian_sigma(0.5, 1e-6, 3, 1.0), rel=1e-9
    )


def test_dp_accounting_gaussian_rdp_is_mironov() -> None:
    acc = rdp_privacy_accountant.RdpAccountant([2.0, 8.0])
    acc.compose(dp_event.GaussianDpEvent(3.0), 5)
    eps_lib = acc.get_epsilon(1e-6)
    own = rdp_to_dp([2.0, 8.0], [5 * 2 / 18, 5 * 8 / 18], 1e-6).epsilon
    assert eps_lib == pytest.approx(own, rel=1e-12)
