"""Central-DP baselines: Laplace and Gaussian noise calibrated for T rounds.

Each function returns the noise per coordinate per round such that releasing T noisy sums of
sensitivity ``l1_sensitivity`` (Laplace) or ``l2_sensitivity`` (Gaussian) is (eps_agg, delta)-DP.

Gaussian: exact. The privacy loss of the Gaussian mechanism with sensitivity D and noise sigma
is N(mu^2/2, mu^2), mu = D / sigma, in both directions; T adaptive rounds add T independent
such losses, i.e. N(T mu^2/2, T mu^2): the composition is exactly one Gaussian mechanism with
mu_T = sqrt(T) mu (Dong, Roth, Su 2022, Corollary 3.3: mu-GDP composes to sqrt(sum mu_i^2)-GDP;
the PLD view: Koskela, Jalko, Honkela 2020). Its exact profile is Balle & Wang 2018, Theorem 8:
``delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)``. So sigma = sqrt(T) sigma_aGM,
sigma_aGM the analytic Gaussian mechanism's noise for one round at (eps_agg, delta), found by
bisection (to 1e-9 relative, rounded up) on the exact profile. Tests check it against
dp_accounting's PLD accountant.

Laplace: the smaller noise of two valid routes:

* RDP: Mironov 2017, Table 2 (scale b, sensitivity 1:
  ``eps(a) = 1/(a-1) log(a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b})``), composed T times
  and converted with CKS20 Proposition 12: Google's ``dp_accounting`` RdpAccountant
  (``LaplaceDpEvent``), which implements exactly these formulas.
* Advanced composition (KOV Theorem 3.4) of per-round guarantees: the Laplace mechanism is
  (Delta/b, 0)-DP, so the whole delta is KOV slack.

The Laplace scale is found by bisection (to 1e-6 relative) on the noise multiplier.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from fedhh.privacy._checks import check_delta, check_eps, check_positive, check_rounds
from fedhh.privacy.composition import ORDERS, kov_inverse

if TYPE_CHECKING:
    from dp_accounting import dp_event


@dataclass(frozen=True)
class CentralCalibration:
    """Noise per coordinate per round for a central mechanism, and the route that set it."""

    mechanism: str  # "laplace" or "gaussian"
    noise_scale: float  # Laplace b or Gaussian sigma, in units of the sums
    rdp_noise_scale: float  # Laplace only (nan for the Gaussian)
    advanced_noise_scale: float  # Laplace only (nan for the Gaussian)
    tightest: str  # Laplace: "rdp" or "advanced-composition"; Gaussian: "exact"
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
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = rdp_privacy_accountant.RdpAccountant(list(ORDERS))
    acc.compose(event, rounds)
    return float(acc.get_epsilon(delta))


def _phi(x: float) -> float:
    """Standard normal CDF."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gaussian_delta(eps: float, noise_multiplier: float) -> float:
    """Balle & Wang 2018, Theorem 8: exact delta(eps) of the Gaussian mechanism, sensitivity 1."""
    s = noise_multiplier
    a = 0.5 / s - eps * s
    b = -0.5 / s - eps * s
    return _phi(a) - math.exp(eps) * _phi(b)


def analytic_gaussian_multiplier(eps: float, delta: float) -> float:
    """Smallest sigma / sensitivity with gaussian_delta(eps, .) <= delta (Balle & Wang 2018).

    delta is decreasing in the multiplier; bisection to 1e-9 relative, the feasible end kept.
    """
    lo, hi = 1e-3, 1.0
    while gaussian_delta(eps, hi) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e9:
            return math.inf
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        if gaussian_delta(eps, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def laplace_calibration(
    eps_agg: float, delta: float, rounds: int, l1_sensitivity: float
) -> CentralCalibration:
    """Laplace scale b per coordinate per round (smaller of the RDP and KOV routes)."""
    eps_agg = check_eps(eps_agg, "eps_agg")
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    sens = check_positive("l1_sensitivity", l1_sensitivity)
    from dp_accounting import dp_event

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
    """Gaussian sigma per coordinate per round: exactly sqrt(T) sigma_aGM (module docstring)."""
    eps_agg = check_eps(eps_agg, "eps_agg")
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    sigma = math.sqrt(rounds) * analytic_gaussian_multiplier(eps_agg, delta) * sens
    return CentralCalibration(
        mechanism="gaussian",
        noise_scale=sigma,
        rdp_noise_scale=math.nan,
        advanced_noise_scale=math.nan,
        tightest="exact",
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
