"""The solver: the largest per-round local epsilon that meets an aggregate (eps, delta) target.

``aggregate_epsilon`` is non-decreasing in eps_local (a randomizer with a smaller epsilon is a
post-processing-equivalent special case for the reductions used), so the answer is found by a
safeguarded bisection on eps_local: the bracket [lo, hi] always has lo feasible
(aggregate <= target, compared exactly) and hi infeasible; each step tries the regula-falsi point of
log(aggregate) - log(target) (Illinois variant) and falls back to the midpoint whenever the
bracket did not halve, until hi - lo <= 1e-3. The returned eps_local is the feasible end, so
plugging it back gives an aggregate epsilon at most the target.

Speed. The search starts from the Gaussian approximation of the method (``_initial_guess``),
usually within a few hundredths of the answer. For the shuffle methods only RDP orders whose
conversion term alone is below the target can matter (``accountant.useful_orders``); the
truncation windows are sized for them (larger orders remain valid, looser bounds); reductions
are cached per (eps0, n, method). Timings in docs/benchmarks.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fedhh.errors import PrivacyError
from fedhh.privacy import methods
from fedhh.privacy._checks import check_eps
from fedhh.privacy.accountant import (
    AggregateEpsilon,
    aggregate_epsilon,
    check_offsets,
    checked_setting,
    useful_orders,
    window_order,
)
from fedhh.privacy.composition import ORDERS, share_down

TOLERANCE = 1e-3
EPS_LOCAL_MAX = 40.0


@dataclass(frozen=True)
class LocalEpsilonSolution:
    """Result of ``solve_local_epsilon`` (JSON-ready via ``to_dict``).

    ``eps_local`` is the per-round local epsilon to use; ``eps_agg_achieved`` the aggregate
    epsilon it achieves (<= ``eps_agg_target``); ``breakdown`` how: each bound's value, which was
    tightest and the best RDP order.
    """

    eps_local: float
    eps_agg_target: float
    eps_agg_achieved: float
    delta: float
    rounds: int
    num_devices: int
    sampling_rate: float
    method: str
    tolerance: float
    evaluations: int
    conditions_verified: bool
    breakdown: AggregateEpsilon
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["breakdown"] = self.breakdown.to_dict()
        d["notes"] = list(self.notes)
        return d


def _gaussian_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth, Su 2022, Corollary 2.13):
    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2). The second term is taken in log space
    (e^eps alone overflows a float above eps ~ 709; the product stays below the first term)."""
    from scipy.special import log_ndtr, ndtr

    second = eps + float(log_ndtr(-eps / mu - mu / 2.0))
    return float(ndtr(-eps / mu + mu / 2.0)) - math.exp(second)


def _initial_guess(eps_agg: float, delta: float, rounds: float, n: int, method: str) -> float:
    """Start of the search: the Gaussian approximation of the method's privacy loss.

    Sum: each round shifts two coordinates by a1 - a0 ~ 1/2 against noise of variance
    n a0, i.e. mu^2 ~ T / (2 n a0); solve mu for (eps_agg, delta), then a0 and eps_local.
    Shuffle: the clones heuristic e^eps0 ~ n eps_r^2 / log(1/delta), eps_r = eps_agg / sqrt(T).
    """
    if method != "sum":
        x = n * eps_agg * eps_agg / (rounds * math.log(1.0 / delta))
        return min(EPS_LOCAL_MAX / 2, max(0.5, math.log(max(x, 1.0)) - 1.5))
    lo, hi = 1e-6, 1e3  # delta of mu-GDP increases with mu
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if _gaussian_delta(eps_agg, mid) < delta else (lo, mid)
    a0 = rounds / (2.0 * n * lo * lo)
    return min(EPS_LOCAL_MAX / 2, max(0.5, math.log(max(1.0 / a0 - 1.0, 1.5))))


def solve_local_epsilon(
    eps_agg: float,
    delta: float,
    rounds: int,
    num_devices: int,
    sampling_rate: float = 1.0,
    method: str = methods.DEFAULT_METHOD,
    cap: float = EPS_LOCAL_MAX,
) -> LocalEpsilonSolution:
    """Largest eps_local (to 1e-3) such that the run satisfies (eps_agg, delta)-DP in aggregate.

    ``cap``: the largest eps_local of use to the caller (at most ``EPS_LOCAL_MAX``); a target
    that it meets is answered with it, no larger one evaluated (``_solve``)."""
    return _solve(eps_agg, delta, rounds, num_devices, sampling_rate, method, None, cap)


def solve_allocation(
    eps_agg: float,
    delta: float,
    offsets: Sequence[float],
    num_devices: int,
    sampling_rate: float = 1.0,
    method: str = methods.DEFAULT_METHOD,
    cap: float = EPS_LOCAL_MAX,
) -> LocalEpsilonSolution:
    """``solve_local_epsilon`` for a per-round allocation (``accountant.allocation_offsets``):
    round i runs at eps_local + offsets[i], so eps_local is the largest round's (offsets <= 0);
    one round per offset."""
    return _solve(eps_agg, delta, len(offsets), num_devices, sampling_rate, method, offsets,
                  cap)


def _solve(eps_agg: float, delta: float, rounds: int, num_devices: int, sampling_rate: float,
           method: str, offsets: Sequence[float] | None, cap: float) -> LocalEpsilonSolution:
    eps_agg = check_eps(eps_agg, "eps_agg")
    delta, rounds, num_devices, sampling_rate, method, n = checked_setting(
        delta, rounds, num_devices, sampling_rate, method)
    if offsets is not None and len(offsets):
        check_offsets(EPS_LOCAL_MAX, offsets, rounds, method)
        if max(offsets) > 0:
            raise PrivacyError("allocation offsets must be <= 0 (eps_local is the largest "
                               f"round's), got {list(offsets)}")
    effective_rounds = float(sum(math.exp(o) for o in offsets)) if offsets else float(rounds)
    orders = useful_orders(eps_agg, delta)
    max_order = window_order(orders)
    if sampling_rate < 1.0 and method == "paper":
        orders = np.asarray(ORDERS)  # Zhu-Wang needs the curve at every integer order <= a
    cache: dict[float, AggregateEpsilon] = {}

    def evaluate(x: float) -> AggregateEpsilon:
        if x not in cache:
            cache[x] = aggregate_epsilon(
                x, delta, rounds, num_devices, sampling_rate, method, orders, max_order,
                offsets,
            )
        return cache[x]

    def gap(x: float) -> float:
        return math.log(max(evaluate(x).eps_agg, 1e-300)) - math.log(eps_agg)

    def fits(x: float) -> bool:
        # Compared exactly, as the ledger compares its plan (``PrivacyLedger.open``): the
        # gap's logs round, and an aggregate a few units in the last place above the target
        # had a gap of 0 (log(10.000000000000002) == log(10.0)) and was taken as feasible.
        return evaluate(x).eps_agg <= eps_agg

    # Bracket: lo feasible, hi infeasible (gap is log(aggregate / target)).
    floor = -min(offsets) if offsets else 0.0  # every round's epsilon stays positive
    # The climb stops at the caller's cap: each evaluation costs more the larger eps_local
    # is, and a target far above what any round can spend (eps_agg 1e300) climbed to 40 in
    # eight of them (~20 s) for a coordinator that runs at 10 (its max_eps_local) anyway.
    # (A cap below the allocation's floor is no cap: the caller refuses that plan.)
    top = max(min(cap, EPS_LOCAL_MAX), floor + 0.25)
    x = min(max(_initial_guess(eps_agg, delta, effective_rounds, n, method), floor + 0.25), top)
    step = 0.25 if method == "sum" else 1.0
    if fits(x):
        lo = x
        while True:
            x = min(top, lo + step)
            if not fits(x):
                hi = x
                break
            lo = x
            if lo >= top:
                notes = (f"capped at eps_local = {top}",)
                return _solution(lo, evaluate(lo), eps_agg, len(cache), notes)
            step *= 2
    else:
        hi = x
        while True:
            x = hi - step if hi - step > floor + 0.25 * (hi - floor) else floor + 0.5 * (hi - floor)
            if x - floor < TOLERANCE:
                raise _below_resolution(eps_agg, delta, rounds, num_devices, sampling_rate,
                                        floor, hi)
            if fits(x):
                lo = x
                break
            hi = x
            step *= 2

    # Safeguarded Illinois bisection on log(aggregate) - log(target).
    f_lo, f_hi = gap(lo), gap(hi)
    side = 0
    while hi - lo > TOLERANCE:
        width = hi - lo
        if math.isfinite(f_lo) and math.isfinite(f_hi) and f_hi != f_lo:
            x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            x = min(max(x, lo + 0.05 * width), hi - 0.05 * width)
        else:
            x = 0.5 * (lo + hi)
        fx = gap(x)
        if fits(x):
            lo, f_lo = x, fx
            if side == -1:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi = x, fx
            if side == 1:
                f_lo *= 0.5
            side = 1
        if hi - lo > 0.5 * width:  # did not halve: bisect
            mid = 0.5 * (lo + hi)
            if fits(mid):
                lo, f_lo = mid, gap(mid)
            else:
                hi, f_hi = mid, gap(mid)
    return _solution(lo, evaluate(lo), eps_agg, len(cache), ())


def _below_resolution(eps_agg: float, delta: float, rounds: int, num_devices: int,
                      sampling_rate: float, floor: float, smallest: float) -> PrivacyError:
    """The error of a target that every eps_local tried, down to ``smallest``, exceeds, when
    the next try would fall within ``TOLERANCE`` of ``floor`` (where a round's epsilon is 0).

    Without an allocation (floor 0) no target eps_agg > 0 is out of reach: T rounds of
    eps-LDP reports are (T eps, 0)-DP (basic composition, Dwork & Roth 2014, Theorem 3.16), so
    eps_local = eps_agg / T meets it; it is below the solver's resolution, not impossible."""
    setting = (f"eps_agg={eps_agg:g}, delta={delta:g} over {rounds} rounds among "
               f"{num_devices} devices (sampling rate {sampling_rate:g})")
    if floor > 0:
        return PrivacyError(
            f"no eps_local tried, down to {smallest:.4g}, meets {setting} under this per-round "
            f"allocation, and the solver resolves eps_local to {TOLERANCE:g} above "
            f"{floor:.4g}, where the allocation's smallest round gets epsilon 0: raise eps_agg "
            f"or narrow the allocation")
    return PrivacyError(
        f"{setting} needs an eps_local below {smallest:.4g} (the smallest tried), at the "
        f"solver's resolution of {TOLERANCE:g}; basic composition meets it at eps_local = "
        f"eps_agg / rounds = {share_down(eps_agg, rounds):.4g} (check any value with "
        f"`fedhh privacy amplify --eps-local`), or raise eps_agg")


def _solution(
    eps_local: float, agg: AggregateEpsilon, target: float, evaluations: int, notes: tuple[str, ...]
) -> LocalEpsilonSolution:
    return LocalEpsilonSolution(
        eps_local=eps_local,
        eps_agg_target=target,
        eps_agg_achieved=agg.eps_agg,
        delta=agg.delta,
        rounds=agg.rounds,
        num_devices=agg.num_devices,
        sampling_rate=agg.sampling_rate,
        method=agg.method,
        tolerance=TOLERANCE,
        evaluations=evaluations,
        conditions_verified=agg.conditions_verified,
        breakdown=agg,
        notes=notes + agg.notes,
    )
