"""Zhu-Wang Theorem 5 against the exact Poisson-subsampled Gaussian of dp_accounting."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from fedhh.privacy.subsampling import subsampled_rdp


@pytest.mark.parametrize(("sigma", "q"), [(2.0, 0.1), (1.0, 0.01), (4.0, 0.5)])
def test_upper_bounds_exact_subsampled_gaussian(sigma: float, q: float) -> None:
    orders = np.array([2.0, 3.0, 4.0, 8.0, 16.0, 32.0])
    base = orders / (2 * sigma * sigma)
    ours = subsampled_rdp(orders, base, q)
    acc = rdp_privacy_accountant.RdpAccountant(list(orders))
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)))
    exact = np.asarray(acc._rdp)
    assert np.all(ours >= exact * (1 - 1e-9))
    assert np.all(ours <= base + 1e-12) or q > 0.3  # amplification for small q


def test_rate_one_is_identity_and_fractional_orders_inf() -> None:
    orders = np.array([1.5, 2.0, 4.0])
    base = np.array([0.1, 0.2, 0.4])
    assert np.array_equal(subsampled_rdp(orders, base, 1.0), base)
    out = subsampled_rdp(orders, base, 0.5)
    assert out[0] == np.inf and np.all(np.isfinite(out[1:]))
