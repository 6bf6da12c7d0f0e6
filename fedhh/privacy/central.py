"""Central-DP baselines: Laplace and Gaussian noise calibrated for T rounds.

Each function returns the noise per coordinate per round such that releasing T noisy sums of
sensitivity ``l1_sensitivity`` (Laplace) or ``l2_sensitivity`` (Gaussian) is (eps_agg, delta)-DP,
taking the smaller noise of two valid routes:

* RDP: Mironov 2017, Table 2 (Laplace with scale b, sensitivity 1:
  ``eps(a) = 1/(a-1) log(a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b})``; Gaussian:
  ``eps(a) = a / (2 sigma^2)``), composed T times and converted with CKS20 Proposition 12.
  Both are Google's ``dp_accounting`` RdpAccountant (``LaplaceDpEvent``, ``GaussianDpEvent``),
  which implements exactly these formulas; tests cross-check them against our own.
* Advanced composition (KOV Theorem 3.4) of per-round guarantees: the Laplace mechanism is
  (Delta/b, 0)-DP, so the whole delta is KOV slack; the Gaussian mechanism's exact per-round
  profile is Balle & Wang 2018, Theorem 8:
  ``delta(eps) = Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D)``, with the total delta
  split between rounds and slack as in ``composition.delta_splits``.

The noise scale is found by bisection (to 1e-6 relative) on the noise multiplier; epsilon is
decreasing in it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from scipy.stats import norm

from fedhh.privacy._checks import check_delta, check_eps, check_positive, check_rounds
from fedhh.privacy.composition import ORDERS, delta_splits, kov_inverse


@dataclass(frozen=True)
class CentralCalibration:
    """Noise per coordinate per round for a central mechanism, and the route that set it."""

    mechanism: str  # "laplace" or "gaussian"
    noise_scale: float  # Laplace b or Gaussian sigma, in units of the sums
    rdp_noise_scale: float
    advanced_noise_scale: float
    tightest: str
    eps_agg: float
    delta: float
    rounds: int
    sensitivity: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _smallest_multiplier(eps_of: Callable[[float], float], target: float) -> float:
    """Smallest multiplier z with eps_of(z) <= target (eps_of decreasing), to 1e-6 relative."""
    lo, hi = 1e-6, 1.0
    while eps_of(hi) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e9:
            return math.inf
    while hi - lo > 1e-6 * hi:
        mid = 0.5 * (lo + hi)
        if eps_of(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _rdp_epsilon(event: dp_event.DpEvent, rounds: int, delta: float) -> float:
    acc = rdp_privacy_accountant.RdpAccountant(list(ORDERS))
    acc.compose(event, rounds)
    return float(acc.get_epsilon(delta))


def gaussian_delta(eps: float, noise_multiplier: float) -> float:
    """Balle & Wang 2018, Theorem 8: exact delta(eps) of the Gaussian mechanism, sensitivity 1."""
    s = noise_multiplier
    a = 0.5 / s - eps * s
    b = -0.5 / s - eps * s
    return float(norm.cdf(a) - math.exp(eps) * norm.cdf(b))


def laplace_calibration(
    eps_agg: float, delta: float, rounds: int, l1_sensitivity: float
) -> CentralCalibration:
    """Laplace scale b per coordinate per round (smaller of the RDP and KOV routes)."""
    eps_agg = check_eps("eps_agg", eps_agg)
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    sens = check_positive("l1_sensitivity", l1_sensitivity)
    z_rdp = _smallest_multiplier(
        lambda z: _rdp_epsilon(dp_event.LaplaceDpEvent(z), rounds, delta), eps_agg
    )
    eps_r = kov_inverse(eps_agg, rounds, delta)  # pure per-round: all of delta is KOV slack
    z_adv = 1.0 / eps_r
    z = min(z_rdp, z_adv)
    return CentralCalibration(
        mechanism="laplace",
        noise_scale=z * sens,
        rdp_noise_scale=z_rdp * sens,
        advanced_noise_scale=z_adv * sens,
        tightest="rdp" if z_rdp <= z_adv else "advanced-composition",
        eps_agg=eps_agg,
        delta=delta,
        rounds=rounds,
        sensitivity=sens,
    )


def gaussian_calibration(
    eps_agg: float, delta: float, rounds: int, l2_sensitivity: float
) -> CentralCalibration:
    """Gaussian sigma per coordinate per round (smaller of the RDP and KOV routes)."""
    eps_agg = check_eps("eps_agg", eps_agg)
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    z_rdp = _smallest_multiplier(
        lambda z: _rdp_epsilon(dp_event.GaussianDpEvent(z), rounds, delta), eps_agg
    )
    z_adv = math.inf
    for split in delta_splits(delta, rounds):
        eps_r = kov_inverse(eps_agg, rounds, split.slack)
        per_round = split.per_round

        def over(z: float, e: float = eps_r, d: float = per_round) -> float:
            # "epsilon-like" decreasing function: 0 when the round meets (e, d), else 1
            return 0.0 if gaussian_delta(e, z) <= d else 1.0

        z_adv = min(z_adv, _smallest_multiplier(over, 0.5))
    z = min(z_rdp, z_adv)
    return CentralCalibration(
        mechanism="gaussian",
        noise_scale=z * sens,
        rdp_noise_scale=z_rdp * sens,
        advanced_noise_scale=z_adv * sens,
        tightest="rdp" if z_rdp <= z_adv else "advanced-composition",
        eps_agg=eps_agg,
        delta=delta,
        rounds=rounds,
        sensitivity=sens,
    )


def central_laplace_scale(
    eps_agg: float, delta: float, rounds: int, l1_sensitivity: float = 1.0
) -> float:
    """Laplace scale b per coordinate per round for (eps_agg, delta) over ``rounds`` rounds."""
    return laplace_calibration(eps_agg, delta, rounds, l1_sensitivity).noise_scale


def central_gaussian_sigma(
    eps_agg: float, delta: float, rounds: int, l2_sensitivity: float = 1.0
) -> float:
    """Gaussian sigma per coordinate per round for (eps_agg, delta) over ``rounds`` rounds."""
    return gaussian_calibration(eps_agg, delta, rounds, l2_sensitivity).noise_scale
