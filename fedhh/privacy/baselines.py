"""Sampling rates of the sample-and-threshold baselines, TrieHH and TrieHH++.

TrieHH (Zhu, Kairouz, McMahan, Sun, Li 2020, "Federated Heavy Hitters Discovery with
Differential Privacy", Corollary 1, as implemented by the authors' reference code,
``SimulateTrieHH._set_theta`` and ``_set_batch_size``): T rounds, each sampling m of the n
devices without replacement and keeping prefixes with at least theta votes, are
(eps, delta)-DP when

    m / n = (e^{eps/T} - 1) / (theta e^{eps/T}),     theta >= e^{eps/T} - 1,
    delta >= (theta - 2) / ((theta - 3) theta!)      (theta >= 4).

TrieHH++ (Cormode & Bharadwaj 2022, "Sample and Threshold Differential Privacy: Histograms and
applications", Lemma 3): Poisson sampling at rate p_s = alpha (1 - e^{-eps}) with threshold theta
is (eps, delta)-DP for eps < 1 and delta = e^{-C_alpha theta}, C_alpha = ln(1/alpha) - 1/(1+alpha),
0 < alpha <= 1; the heavy-hitters paper takes the per-round eps from advanced composition
(KOV Theorem 3.4) and sets alpha from delta. Choice (per PRIVACY.md): the total delta is split
evenly over the rounds, delta_r = delta / T, with basic composition eps_r = eps_agg / T (KOV's
first term, no slack needed), both rounded down so that T shares add up to at most the whole
exactly (``composition.share_down``); when KOV's other terms are tighter (many rounds) part of
delta is kept as KOV slack and the rest split evenly. The best rate over these splits is returned.
C_alpha is decreasing on (0, 1), so alpha solves C_alpha = ln(1/delta_r) / theta by bisection.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from fedhh.errors import PrivacyError
from fedhh.privacy._checks import check_delta, check_devices, check_eps, check_rounds
from fedhh.privacy.composition import SLACK_FRACTIONS, kov_inverse, share_down


@dataclass(frozen=True)
class BaselineRate:
    """A baseline's sampling rate and the per-round parameters behind it."""

    baseline: str
    sampling_rate: float
    theta: int
    rounds: int
    eps_agg: float
    delta: float
    per_round_epsilon: float
    per_round_delta: float
    alpha: float | None = None  # TrieHH++ only
    batch_size: int | None = None  # TrieHH only: devices sampled per round

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_theta(theta: int, minimum: int) -> int:
    if isinstance(theta, bool) or int(theta) != theta or int(theta) < minimum:
        raise PrivacyError(f"theta must be an integer >= {minimum}, got {theta}")
    return int(theta)


def triehh_delta(theta: int) -> float:
    """Smallest delta TrieHH's Corollary 1 allows for threshold theta: (t-2) / ((t-3) t!)."""
    theta = _check_theta(theta, 4)
    return math.exp(math.log(theta - 2) - math.log(theta - 3) - math.lgamma(theta + 1))


def triehh_rate(
    theta: int, num_devices: int, rounds: int, eps_agg: float, delta: float
) -> BaselineRate:
    """TrieHH sampling rate m/n for T rounds at (eps_agg, delta) (Zhu et al. 2020, Cor. 1)."""
    theta = _check_theta(theta, 4)
    n = check_devices(num_devices)
    rounds = check_rounds(rounds)
    eps_agg = check_eps(eps_agg, "eps_agg")
    delta = check_delta(delta)
    floor_delta = triehh_delta(theta)
    if delta < floor_delta:
        raise PrivacyError(
            f"TrieHH with theta={theta} needs delta >= {floor_delta:.3g}, got delta={delta}"
        )
    eps_r = share_down(eps_agg, rounds)
    if theta < math.expm1(eps_r):
        raise PrivacyError(f"TrieHH needs theta >= e^(eps/T) - 1 = {math.expm1(eps_r):.3g}")
    rate = -math.expm1(-eps_r) / theta
    return BaselineRate(
        baseline="triehh",
        sampling_rate=rate,
        theta=theta,
        rounds=rounds,
        eps_agg=eps_agg,
        delta=delta,
        per_round_epsilon=eps_r,
        per_round_delta=floor_delta,
        batch_size=int(n * rate),
    )


def _c_alpha(alpha: float) -> float:
    return -math.log(alpha) - 1.0 / (1.0 + alpha)


def _c_log_alpha(u: float) -> float:
    """C_alpha at alpha = e^u, for u <= 0 (ln(1/alpha) = -u: no log of an underflowed alpha)."""
    return -u - 1.0 / (1.0 + math.exp(u))


def triehhpp_alpha(theta: int, per_round_delta: float) -> float:
    """alpha in (0, 1] with e^{-C_alpha theta} <= delta_r (Cormode & Bharadwaj Lemma 3), the
    largest to 1e-15 relative.

    C_alpha is decreasing, and with u = ln(alpha) it is -u - 1/(1 + e^u), between -u - 1 and
    -u - 1/2, so the root lies in u in [-(target + 1), -(target + 1/2)] (target =
    ln(1/delta_r) / theta) and is bisected there in u: alpha itself may be far below 1e-300
    (theta = 1, a tiny delta), where a product of two alphas underflowed to 0 and math.log
    raised 'math domain error'. An alpha below the smallest positive double (target above
    ~744) is refused: the sampling rate alpha (1 - e^-eps) would be 0."""
    if not per_round_delta > 0.0:  # (delta / T underflowed: math.log raised 'domain error')
        raise PrivacyError(f"TrieHH++ (Lemma 3) with theta={theta}: the per-round delta is "
                           f"{per_round_delta:.3g}, not positive (delta / T underflows); raise "
                           "delta")
    target = -math.log(per_round_delta) / theta
    if target <= _c_alpha(1.0):
        return 1.0
    lo, hi = -(target + 1.0), min(0.0, -(target + 0.5))  # C(lo) >= target >= C(hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _c_log_alpha(mid) >= target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15:
            break
    alpha = math.exp(lo)
    # exp rounds to nearest: step down until C(alpha) >= target holds for the double returned
    while alpha > 0.0 and _c_alpha(alpha) < target:
        alpha = math.nextafter(alpha, 0.0)
    if alpha == 0.0:
        raise PrivacyError(
            f"TrieHH++ (Lemma 3) with theta={theta} and per-round delta {per_round_delta:.3g} "
            f"needs alpha = e^-{-lo:.4g}, below the smallest positive double: the sampling "
            "rate would be 0; raise theta or delta")
    return alpha  # C(alpha) >= target: delta at alpha is <= delta_r


def triehhpp_rate(theta: int, rounds: int, eps_agg: float, delta: float) -> BaselineRate:
    """TrieHH++ Poisson sampling rate for T rounds at (eps_agg, delta) (C&B 2022, Lemma 3)."""
    theta = _check_theta(theta, 1)
    rounds = check_rounds(rounds)
    eps_agg = check_eps(eps_agg, "eps_agg")
    delta = check_delta(delta)
    best: BaselineRate | None = None
    for f in SLACK_FRACTIONS:
        if rounds == 1 and f > 0:
            continue
        slack = f * delta
        eps_r = kov_inverse(eps_agg, rounds, slack)
        # T per-round deltas plus the slack: at most delta, exactly
        delta_r = share_down(Fraction(delta) - Fraction(slack), rounds)
        if eps_r >= 1.0:
            continue  # Lemma 3 needs eps < 1
        alpha = triehhpp_alpha(theta, delta_r)
        rate = alpha * -math.expm1(-eps_r)
        if best is None or rate > best.sampling_rate:
            best = BaselineRate(
                baseline="triehh++",
                sampling_rate=rate,
                theta=theta,
                rounds=rounds,
                eps_agg=eps_agg,
                delta=delta,
                per_round_epsilon=eps_r,
                per_round_delta=delta_r,
                alpha=alpha,
            )
    if best is None:
        raise PrivacyError(
            f"TrieHH++ (Lemma 3) needs per-round eps < 1; eps_agg={eps_agg} over {rounds} "
            "rounds gives more"
        )
    return best


def triehh_sampling_rate(
    theta: int, num_devices: int, rounds: int, eps_agg: float, delta: float
) -> float:
    """TrieHH sampling rate (fraction of devices sampled per round)."""
    return triehh_rate(theta, num_devices, rounds, eps_agg, delta).sampling_rate


def triehhpp_sampling_rate(theta: int, rounds: int, eps_agg: float, delta: float) -> float:
    """TrieHH++ Poisson sampling rate per round."""
    return triehhpp_rate(theta, rounds, eps_agg, delta).sampling_rate
