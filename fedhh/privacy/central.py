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

The Laplace scale is found by bisection (to 1e-6 relative) on the noise multiplier, and each
scale (and the Gaussian sigma, sqrt(T) sigma_aGM x sensitivity) is the exact product rounded up
to a double, never to nearest (``_scale_up``, ``_sigma_up``). The RDP and
KOV routes see only the L1 sensitivity (one coordinate shifted by all of it, the worst case a
histogram of unknown shape can have); at T = 12, eps_agg = 1, delta = 1e-6 and two coordinates
the PLD route needs 19.3 where they need 23.9 (basic composition is as good as either there).

Limits. Both calibrations refuse eps_agg above ``EPS_AGG_MAX`` = 709: the profile of Balle &
Wang's Theorem 8 and KOV Theorem 3.4 carry the factor e^eps, a finite double only up to
ln(2^1024) = 709.78 (and a guarantee that multiplies probabilities by e^709 bounds nothing).
Within it the Gaussian profile is evaluated with its second term in log space (``gaussian_delta``),
so no term overflows or underflows to a wrong zero. A noise multiplier (noise / sensitivity)
above ``MAX_MULTIPLIER`` is refused as unusable (a tiny eps_agg with a tiny delta needs it). The
searches are bounded: the multiplier stays in [1e-6, MAX_MULTIPLIER] (Laplace) and
[1e-3, MAX_MULTIPLIER] (Gaussian), whose lower ends are infeasible at every eps_agg <= 709 (each
function's docstring says why), and the PLD route's discretization interval grows with eps_agg
(``_pld_interval``), so one evaluation costs about the same at every eps_agg. The PLD route
reads a multiplier below 1 / ``PLD_LOSS_MAX`` = 1/700 as infeasible: dp_accounting cannot build
the PLD of a mechanism whose loss exceeds ~740 (``_pld_laplace_epsilon``); at one round and
eps_agg in (700, 709] the KOV route answers, b = sensitivity / eps_agg.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from fedhh.errors import PrivacyError
from fedhh.privacy._checks import check_delta, check_eps, check_positive, check_rounds
from fedhh.privacy.composition import ORDERS, kov_inverse, rounded_up, share_down

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


EPS_AGG_MAX = 709.0  # e^eps_agg must be a finite double (module docstring, Limits)
MAX_MULTIPLIER = 1e9  # noise / sensitivity per round above which a calibration is refused
PLD_INTERVAL = 1e-4  # the PLD route's loss discretization at eps_agg <= 1 (dp_accounting's)
# The PLD route's largest loss of one mechanism, 1 / multiplier: e^700 and e^-700 are normal
# doubles (``_pld_laplace_epsilon``).
PLD_LOSS_MAX = 700.0


def check_eps_agg(eps_agg: float) -> float:
    """A positive eps_agg of at most ``EPS_AGG_MAX`` (module docstring, Limits)."""
    eps_agg = check_eps(eps_agg, "eps_agg")
    if eps_agg > EPS_AGG_MAX:
        raise PrivacyError(f"eps_agg must be at most {EPS_AGG_MAX:g} for a central calibration "
                           f"(e^eps_agg must be a finite number), got {eps_agg:g}")
    return eps_agg


def _refuse_unusable(mechanism: str, multiplier: float, eps_agg: float, delta: float,
                     rounds: int) -> None:
    """PrivacyError when no route found a noise multiplier of at most ``MAX_MULTIPLIER``."""
    if not multiplier <= MAX_MULTIPLIER:
        raise PrivacyError(
            f"eps_agg={eps_agg:g}, delta={delta:g} over {rounds} round(s) needs {mechanism} "
            f"noise above {MAX_MULTIPLIER:g} x the sensitivity per round, the most calibrated; "
            f"raise eps_agg or delta")


def _smallest_multiplier(eps_of: Callable[[float], float], target: float) -> float:
    """Smallest multiplier z with eps_of(z) <= target (eps_of decreasing), to 1e-6 relative;
    inf above ``MAX_MULTIPLIER``.

    The search starts from [1e-6, 1], and z = 1e-6 is infeasible at every target <=
    ``EPS_AGG_MAX``: for one Laplace mechanism of scale z and sensitivity 1 the event
    S = {output > 1/2} has P(S) = 1 - e^{-1/(2z)}/2 on one side and P'(S) = e^{-1/(2z)}/2 on the
    other, so by the definition of (eps, delta)-DP (Dwork & Roth 2014, Definition 2.4)
    delta >= P(S) - e^eps P'(S) = 1 - (1 + e^eps) e^{-500000}/2, which is 1 in double precision
    for eps <= 709; a composition releases that mechanism too, so its delta is no smaller
    (post-processing, Dwork & Roth Proposition 2.1), and the RDP and PLD routes bound the true
    epsilon from above. So the bisection keeps lo infeasible and hi feasible."""
    lo, hi = 1e-6, 1.0
    while eps_of(hi) > target:
        lo, hi = hi, hi * 2.0
        if hi > MAX_MULTIPLIER:
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


def _pld_interval(eps_agg: float) -> float:
    """The PLD route's discretization interval: ``PLD_INTERVAL`` up to eps_agg = 1, then
    ``PLD_INTERVAL * eps_agg``.

    dp_accounting's pessimistic connect-the-dots PLD dominates the mechanism's at every
    interval (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the Dots: Tighter
    Discrete Approximations of Privacy Loss Distributions", Algorithm 1: its profile is the
    linear interpolation in e^eps of the true, convex profile at the grid points, above it; see
    ``fedhh.privacy.dots``), and compositions of dominating pairs dominate (Zhu, Dong, Wang
    2022, Theorem 10), so any interval gives a valid upper bound, the coarser the looser.

    Cost. The loss of a scale-z, sensitivity-1 mechanism lies in [-1/z, 1/z], and the route's
    z is about k / eps_agg for k compositions, so the composed grid has about 2 eps_agg /
    interval points: at a fixed interval an eps_agg of 100 took 36 s. An interval proportional
    to eps_agg keeps the grid, and the slack relative to eps_agg (at most k intervals), as at
    eps_agg = 1."""
    return PLD_INTERVAL * max(1.0, eps_agg)


def _pld_laplace_epsilon(multiplier: float, compositions: int, delta: float,
                         interval: float = PLD_INTERVAL) -> float:
    """eps at ``delta`` of ``compositions`` scalar Laplace mechanisms of scale ``multiplier``
    and sensitivity 1 (dp_accounting's pessimistic PLD at discretization ``interval``; module
    docstring, the PLD route); inf (infeasible) when one mechanism's loss 1/multiplier exceeds
    ``PLD_LOSS_MAX``.

    Composed losses near 709 (eps_agg above ~350) make dp_accounting's ratio of masses overflow
    to inf (it divides by e^-loss); it then reads epsilon as inf, i.e. that multiplier as
    infeasible, the safe side, so the overflow is silenced rather than reported. A single
    mechanism's loss above ~740 is worse: e^-loss underflows and building its PLD fails
    ("deltas are not in non-increasing order", met from 740.6 on at every interval eps_agg
    <= 709 uses). Such multipliers are read as infeasible before dp_accounting sees them: any
    feasible multiplier the search keeps is still a valid bound, the route then answers at
    least 1 / ``PLD_LOSS_MAX``, and the RDP and KOV routes (b = 1 / eps_agg at one round)
    answer above it."""
    import numpy as np
    from dp_accounting.pld import privacy_loss_distribution

    if 1.0 / multiplier > PLD_LOSS_MAX:
        return math.inf
    one = privacy_loss_distribution.from_laplace_mechanism(
        multiplier, sensitivity=1.0, pessimistic_estimate=True,
        value_discretization_interval=interval)
    with np.errstate(over="ignore"):
        return float(one.self_compose(compositions).get_epsilon_for_delta(delta))


def _phi(x: float) -> float:
    """Standard normal CDF."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gaussian_delta(eps: float, noise_multiplier: float) -> float:
    """Balle & Wang 2018, "Improving the Gaussian Mechanism for Differential Privacy",
    Theorem 8: exact delta(eps) of the Gaussian mechanism of sensitivity 1 and noise s,
    ``Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s)``.

    The second term is taken in log space, ``exp(eps + log Phi(b))``: e^eps alone overflows a
    double above eps = 709.78, and Phi(b) underflows (to a wrong zero) below b = -38.5, where
    their product can still matter; the product is at most the first term, so it never
    overflows."""
    from scipy.special import log_ndtr

    s = noise_multiplier
    a = 0.5 / s - eps * s
    b = -0.5 / s - eps * s
    return _phi(a) - math.exp(eps + float(log_ndtr(b)))


def analytic_gaussian_multiplier(eps: float, delta: float) -> float:
    """Smallest sigma / sensitivity with gaussian_delta(eps, .) <= delta (Balle & Wang 2018,
    Theorem 8); inf above ``MAX_MULTIPLIER``.

    delta is decreasing in the multiplier; bisection to 1e-9 relative, the feasible end kept.
    The bracket starts at [1e-3, 1]; s = 1e-3 is infeasible at every eps <= ``EPS_AGG_MAX``:
    its first term is Phi(500 - eps / 1000) = 1 to double precision and its second at most
    e^{eps} Phi(-500) < e^{709 - 125000}, so delta(eps) = 1 > delta.
    """
    lo, hi = 1e-3, 1.0
    while gaussian_delta(eps, hi) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > MAX_MULTIPLIER:
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
    eps_agg = check_eps_agg(eps_agg)
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    sens = check_positive("l1_sensitivity", l1_sensitivity)
    if isinstance(coordinates, bool) or not isinstance(coordinates, int) or coordinates < 1:
        raise ValueError(f"coordinates must be an integer >= 1, got {coordinates!r}")
    from dp_accounting import dp_event

    # In units of the per-coordinate shift: the PLD route's multiplier is b / (sens / coords).
    # Each route's multiplier is exact (a Fraction), and so is its product with sens; only the
    # scale itself is rounded, up (``_scale_up``).
    interval = _pld_interval(eps_agg)
    z_pld = _exact(_smallest_multiplier(
        lambda z: _pld_laplace_epsilon(z, coordinates * rounds, delta, interval), eps_agg
    )) / coordinates
    z_rdp = _exact(_smallest_multiplier(
        lambda z: _rdp_epsilon(dp_event.LaplaceDpEvent(z), rounds, delta), eps_agg
    ))
    # Pure per-round: all of delta is KOV slack. KOV's first term is basic composition
    # (k eps_r <= eps_agg needs no slack), so eps_agg / T rounded down is always a valid
    # per-round epsilon; kov_inverse stops at an absolute 1e-13 and returns 0 below it
    # (eps_agg = 1e-300). Laplace noise of scale sens / eps_r is eps_r-DP (Dwork & Roth 2014,
    # Theorem 3.6).
    eps_r = max(kov_inverse(eps_agg, rounds, delta), share_down(eps_agg, rounds))
    z_adv = 1 / Fraction(eps_r) if eps_r > 0 else math.inf
    routes = {"pld": z_pld, "rdp": z_rdp, "advanced-composition": z_adv}
    tightest = min(routes, key=routes.__getitem__)
    _refuse_unusable("Laplace", float(routes[tightest]), eps_agg, delta, rounds)
    scales = {route: _scale_up(z, sens) for route, z in routes.items()}
    return CentralCalibration(
        mechanism="laplace",
        noise_scale=scales[tightest],
        pld_noise_scale=scales["pld"],
        rdp_noise_scale=scales["rdp"],
        advanced_noise_scale=scales["advanced-composition"],
        tightest=tightest,
        eps_agg=eps_agg,
        delta=delta,
        rounds=rounds,
        sensitivity=sens,
    )


def _exact(multiplier: float) -> Fraction | float:
    """A searched multiplier as an exact Fraction; inf (no multiplier up to
    ``MAX_MULTIPLIER`` found) stays inf, which no Fraction holds."""
    return Fraction(multiplier) if math.isfinite(multiplier) else multiplier


def _scale_up(multiplier: Fraction | float, sensitivity: float) -> float:
    """The smallest double at or above ``multiplier x sensitivity``, exactly: a noise scale
    that rounds to nearest can come out below the one its route proved private (Dwork & Roth
    2014, Theorem 3.6: Laplace noise of scale Delta / eps is eps-DP, and no less). Before, the
    product rounded to nearest: at eps_agg = 700.5, one round and sensitivity 1.3, the scale was
    0.0018558172733761599, below 1.3 / 700.5 exactly. 1 / eps_r alone rounds below too: 0.6 / 3
    rounded down is 0.19999999999999998, 1 / that rounds to 5.0, and 3 rounds at scale 5 are
    3 / 5 > 0.6 exactly."""
    if isinstance(multiplier, float):  # inf (``_exact``)
        return multiplier
    return rounded_up(multiplier * Fraction(sensitivity))


def gaussian_calibration(
    eps_agg: float, delta: float, rounds: int, l2_sensitivity: float
) -> CentralCalibration:
    """Gaussian sigma per coordinate per round: exactly sqrt(T) sigma_aGM (module docstring)."""
    eps_agg = check_eps_agg(eps_agg)
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    one_round = analytic_gaussian_multiplier(eps_agg, delta)
    _refuse_unusable("Gaussian", math.sqrt(rounds) * one_round, eps_agg, delta, rounds)
    sigma = _sigma_up(rounds, one_round, sens)
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


def _sigma_up(rounds: int, one_round: float, sensitivity: float) -> float:
    """The smallest double at or above sqrt(rounds) x one_round x sensitivity, exactly: T
    rounds at sigma compose to one Gaussian mechanism of sigma / sqrt(T) (Dong, Roth, Su 2022,
    Corollary 3.3), which must be at least the one-round noise the exact profile (Balle & Wang
    2018, Theorem 8) found. Compared squared, in Fractions, since sqrt(T) is irrational; the
    float product's three roundings put it below the exact value about half the time, and an
    ulp or more above it about one time in thirty, so it is moved down as well as up."""
    sigma = math.sqrt(rounds) * one_round * sensitivity
    if not math.isfinite(sigma):
        return sigma
    floor = rounds * (Fraction(one_round) * Fraction(sensitivity)) ** 2
    while Fraction(sigma) ** 2 < floor:
        sigma = math.nextafter(sigma, math.inf)
    while Fraction(below := math.nextafter(sigma, 0.0)) ** 2 >= floor:
        sigma = below
    return sigma


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
