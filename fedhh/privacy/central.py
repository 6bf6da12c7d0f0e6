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

Laplace: the smallest noise of three valid routes:

* PLD (the exact one, up to dp_accounting's pessimistic discretization): a neighbouring
  dataset changes ``coordinates`` coordinates of a round's sums, each by l1_sensitivity /
  coordinates (our histograms: a device holding v instead of w changes two coordinates by 1);
  independent Laplace noise on each makes a round's privacy loss the sum of ``coordinates``
  independent losses of the scalar Laplace mechanism, and T adaptive rounds add T such rounds
  (the PLD composition theorem, Koskela, Jalko, Honkela 2020; Dwork & Rothblum's privacy loss
  random variable). dp_accounting's ``from_laplace_mechanism`` (pessimistic estimate), composed
  ``coordinates x T`` times, ``get_epsilon_for_delta``. A neighbour that changes fewer
  coordinates (adding or removing a device: one) has a loss dominated by it (post-processing:
  drop the extra coordinate's release).
* RDP: Mironov 2017, Table 2 (scale b, sensitivity 1:
  ``eps(a) = 1/(a-1) log(a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b})``), composed T times
  and converted with CKS20 Proposition 12: Google's ``dp_accounting`` RdpAccountant
  (``LaplaceDpEvent``), which implements exactly these formulas.
* Advanced composition (KOV Theorem 3.4) of per-round guarantees: the Laplace mechanism is
  (Delta/b, 0)-DP, so the whole delta is KOV slack.

The Laplace scale is found by bisection (to 1e-6 relative) on the noise multiplier. The RDP and
KOV routes see only the L1 sensitivity (one coordinate shifted by all of it, the worst case a
histogram of unknown shape can have); at T = 12, eps_agg = 1, delta = 1e-6 and two coordinates
the PLD route needs 19.3 where they need 23.9 (basic composition is as good as either there).
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
    pld_noise_scale: float  # Laplace only (nan for the Gaussian)
    rdp_noise_scale: float  # Laplace only (nan for the Gaussian)
    advanced_noise_scale: float  # Laplace only (nan for the Gaussian)
    tightest: str  # Laplace: "pld", "rdp" or "advanced-composition"; Gaussian: "exact"
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


def _pld_laplace_epsilon(multiplier: float, compositions: int, delta: float) -> float:
    """eps at ``delta`` of ``compositions`` scalar Laplace mechanisms of scale ``multiplier``
    and sensitivity 1 (dp_accounting's pessimistic PLD; module docstring, the PLD route)."""
    from dp_accounting.pld import privacy_loss_distribution

    one = privacy_loss_distribution.from_laplace_mechanism(
        multiplier, sensitivity=1.0, pessimistic_estimate=True)
    return float(one.self_compose(compositions).get_epsilon_for_delta(delta))


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
    eps_agg: float, delta: float, rounds: int, l1_sensitivity: float, coordinates: int = 1
) -> CentralCalibration:
    """Laplace scale b per coordinate per round (smallest of the PLD, RDP and KOV routes);
    a neighbour changes at most ``coordinates`` coordinates, each by at most l1_sensitivity /
    coordinates (module docstring)."""
    eps_agg = check_eps(eps_agg, "eps_agg")
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    sens = check_positive("l1_sensitivity", l1_sensitivity)
    if isinstance(coordinates, bool) or not isinstance(coordinates, int) or coordinates < 1:
        raise ValueError(f"coordinates must be an integer >= 1, got {coordinates!r}")
    from dp_accounting import dp_event

    # In units of the per-coordinate shift: the PLD route's multiplier is b / (sens / coords).
    z_pld = _smallest_multiplier(
        lambda z: _pld_laplace_epsilon(z, coordinates * rounds, delta), eps_agg
    ) / coordinates
    z_rdp = _smallest_multiplier(
        lambda z: _rdp_epsilon(dp_event.LaplaceDpEvent(z), rounds, delta), eps_agg
    )
    eps_r = kov_inverse(eps_agg, rounds, delta)  # pure per-round: all of delta is KOV slack
    z_adv = 1.0 / eps_r
    routes = {"pld": z_pld, "rdp": z_rdp, "advanced-composition": z_adv}
    tightest = min(routes, key=routes.__getitem__)
    return CentralCalibration(
        mechanism="laplace",
        noise_scale=routes[tightest] * sens,
        pld_noise_scale=z_pld * sens,
        rdp_noise_scale=z_rdp * sens,
        advanced_noise_scale=z_adv * sens,
        tightest=tightest,
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
        pld_noise_scale=math.nan,
        rdp_noise_scale=math.nan,
        advanced_noise_scale=math.nan,
        tightest="exact",
        eps_agg=eps_agg,
        delta=delta,
        rounds=rounds,
        sensitivity=sens,
    )


def central_laplace_scale(
    eps_agg: float, delta: float, rounds: int, l1_sensitivity: float = 1.0, coordinates: int = 1
) -> float:
    """Laplace scale b per coordinate per round for (eps_agg, delta) over ``rounds`` rounds."""
    return laplace_calibration(eps_agg, delta, rounds, l1_sensitivity, coordinates).noise_scale


def central_gaussian_sigma(
    eps_agg: float, delta: float, rounds: int, l2_sensitivity: float = 1.0
) -> float:
    """Gaussian sigma per coordinate per round for (eps_agg, delta) over ``rounds`` rounds."""
    return gaussian_calibration(eps_agg, delta, rounds, l2_sensitivity).noise_scale
