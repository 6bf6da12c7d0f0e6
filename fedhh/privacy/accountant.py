"""The forward map: T rounds of eps_local-LDP reports -> aggregate (eps, delta).

Method ``"sum"`` (default): the privacy loss distribution of the released sums (``sum_pld``),
composed over the T rounds and read at delta; capped by basic composition T eps_local.

Shuffle methods (``"clones"``, ``"paper"``, ``"closed-form"``): the tighter of

* the RDP path: per-round RDP curve of the shuffle, times T (RDP composition, Mironov 2017
  Proposition 1), converted with CKS20 Proposition 12 and minimised over the orders
  (``composition.rdp_to_dp``);
* the advanced-composition path: per-round (eps_r, delta_r) of the shuffle, composed with KOV
  Theorem 3.4; the total delta is shared between the rounds and the KOV slack,
  ``1 - (1 - delta_r)^T (1 - slack) = delta``, trying the splits of
  ``composition.SLACK_FRACTIONS`` and keeping the best.

Poisson sampling at rate q: every method accounts a round given its participant count m
(independent of the data), at the expected ``m = round(q N)``; ``"sum"`` and ``"clones"``
exactly given m (``sum_pld.sampled_round_pld``, ``clones.CloneReduction``), ``"paper"`` as the
paper does (Zhu-Wang Theorem 5 on the shuffle RDP at m, see ``subsampling``; RDP path only),
``"closed-form"`` not at all (basic composition).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fedhh.errors import ConfigError, PrivacyError
from fedhh.privacy import methods, shuffle, sum_pld
from fedhh.privacy._checks import (
    check_delta,
    check_devices,
    check_eps_local,
    check_rate,
    check_rounds,
)
from fedhh.privacy.composition import (
    ORDERS,
    cks_epsilons,
    delta_splits,
    kov_epsilon,
    rdp_to_dp,
    sum_up,
)
from fedhh.privacy.randomizer_class import covered_by_fmt21
from fedhh.privacy.subsampling import subsampled_rdp


@dataclass(frozen=True)
class AggregateEpsilon:
    """Achieved aggregate epsilon of a run and how it was obtained (JSON-ready via to_dict)."""

    eps_agg: float
    delta: float
    eps_local: float
    rounds: int
    num_devices: int
    participants: int
    sampling_rate: float
    method: str
    tightest: str  # "pld", "rdp", "advanced-composition" or "pure"
    rdp_epsilon: float
    rdp_order: float
    advanced_epsilon: float
    per_round_epsilon: float
    per_round_delta: float
    slack_delta: float
    conditions_verified: bool
    notes: tuple[str, ...] = field(default=())
    pld_epsilon: float = math.nan  # the "sum" method's composed privacy loss distribution

    def __float__(self) -> float:
        return self.eps_agg

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()
        }


PLANNING_TAIL = 1e-9  # chance that a sampled round's participant count falls outside the plan
# Methods that condition on the participant count m of a Poisson-sampled round: the mixture
# weight m/N of the neighbouring device grows with m, and so does the round's loss. The others
# shuffle among the m participants (more participants hide each report better).
GROWS_WITH_PARTICIPANTS = frozenset({"sum", "clones"})


def participants_for(num_devices: int, sampling_rate: float,
                     method: str = methods.DEFAULT_METHOD) -> int:
    """Participant count a plan is solved for (at least 2): all devices without sampling.

    With Poisson sampling at rate q the count is m ~ Bin(N, q), independent of the data, and a
    round is charged at its real m. Planning at the mean would leave about half the rounds over
    the plan (refused); the plan takes instead the binomial quantile that a round passes with
    probability at most ``PLANNING_TAIL``, on the costly side for the method: the upper quantile
    where the loss grows with m (``GROWS_WITH_PARTICIPANTS``), the lower one where it falls.
    A rate whose mean N q is below 2 is refused: most of its rounds could not be released."""
    if sampling_rate >= 1.0:
        return max(2, num_devices)
    if num_devices * sampling_rate < 2:
        # (a sum of fewer than 2 reports is refused; below that mean most rounds would be)
        raise PrivacyError(f"sampling_rate {sampling_rate:g} over {num_devices:,} devices gives "
                           f"rounds of {num_devices * sampling_rate:.3g} contributors on "
                           f"average; a round needs at least 2: raise it")
    from scipy.stats import binom

    if methods.check_method(method) in GROWS_WITH_PARTICIPANTS:
        m = int(binom.isf(PLANNING_TAIL, num_devices, sampling_rate))
    else:
        m = int(binom.ppf(PLANNING_TAIL, num_devices, sampling_rate))
    return min(num_devices, max(2, m))


def conditions(method: str, eps_local: float, sampling_rate: float) -> tuple[bool, tuple[str, ...]]:
    """Whether every theorem used is proven for our randomizer, and why not if not."""
    notes: list[str] = []
    ok = True
    if method == "paper":
        ok = False
        notes.append(
            "FMT23 stronger-clone reduction: its errata restricts it to a class of randomizers; "
            "one-hot + asymmetric RR fails the decomposition's necessary condition "
            "(see fedhh.privacy.randomizer_class), so this is a reproduction of the paper's "
            "accounting, not a proven guarantee"
        )
        if sampling_rate < 1.0:
            notes.append(
                "Poisson sampling accounted as in the paper (Zhu-Wang Theorem 5 on the shuffle "
                "RDP at the expected participant count); its add/remove premise is not verified "
                "for this setting"
            )
    elif not covered_by_fmt21(eps_local):
        ok = False
        notes.append("randomizer is not eps_local-DP under replacement")
    if method == "sum":
        notes.append(
            "guarantee of the released per-coordinate sums: holds while secure aggregation "
            "reveals only sums over >= n_min devices (each report is eps_local-LDP regardless)"
        )
    return ok, tuple(notes)


def useful_orders(
    eps_target: float, delta: float, orders: tuple[float, ...] = ORDERS
) -> np.ndarray:
    """Orders whose CKS conversion term alone is below the target (the others cannot help)."""
    a = np.asarray(orders, dtype=float)
    conv = cks_epsilons(a, np.zeros_like(a), delta)
    keep = a[conv < eps_target]
    return keep if keep.size else a[-1:]


# The widest allocation: a round's weight at least the largest's / e^40. Round i runs at
# eps_local + log(w_i / max w), and eps_local is at most 40 (``solver.EPS_LOCAL_MAX``, the
# largest the accountants solve for), so a round below that ratio could never get a positive
# epsilon, whatever eps_local (``check_offsets`` would refuse every one).
MAX_LOG_WEIGHT_RATIO = 40.0


def allocation_offsets(weights: Sequence[float]) -> tuple[float, ...]:
    """Per-round epsilon offsets of an allocation: round i gets ``log(w_i / max w)`` more than
    eps_local, so eps_local is the largest round's local epsilon. A weight is a share of
    e^eps, which each round's privacy cost and the inverse variance of its estimates are both
    proportional to at large n (docs/utility.md).

    The offsets are ``log w_i - log max w``: the quotient w_i / max w underflows to 0 (and its
    log fails) when the weights span more than a double's range (1e-300 against 1e300). An
    allocation wider than e^``MAX_LOG_WEIGHT_RATIO`` is refused (ConfigError naming
    round_budget): no eps_local gives its smallest round a positive epsilon."""
    values = [float(w) for w in weights]
    if not values or not all(math.isfinite(w) and w > 0 for w in values):
        raise PrivacyError(f"allocation weights must be positive numbers, got {weights!r}")
    top = math.log(max(values))
    offsets = tuple(math.log(w) - top for w in values)
    low = min(range(len(values)), key=offsets.__getitem__)
    if -offsets[low] >= MAX_LOG_WEIGHT_RATIO:
        raise ConfigError(
            f"round_budget weights must be within a factor e^{MAX_LOG_WEIGHT_RATIO:g} "
            f"(~{math.exp(MAX_LOG_WEIGHT_RATIO):.3g}) of each other, got {values[low]:g} "
            f"against {max(values):g}: round {low + 1} would get eps_local - "
            f"{-offsets[low]:.4g}, not positive at any eps_local the accountants solve for "
            f"(at most {MAX_LOG_WEIGHT_RATIO:g})")
    return offsets


def repeat_offsets(offsets: Sequence[float], items: Sequence[int]) -> tuple[float, ...]:
    """The charged offsets of rounds whose devices report several items: round i, with
    ``items[i]`` = k one-bit-per-item elements per report, is charged as k rounds at its own
    local epsilon.

    Why this is exact (the sum method, ``fedhh.privacy.sum_pld``): a report's coordinates are
    independent coins, a1 at each reported element and a0 elsewhere, so replacing one device's
    set S (|S| <= k) by S' changes at most 2k coordinate sums, each the pair
    ``N + Bern(a1)`` vs ``N + Bern(a0)`` (or its mirror) with N the other devices' part, which
    the one-hot round's dominating pair covers for every number of other holders. The round's
    pair is the product of those coordinate pairs (independent coins), i.e. of k one-hot round
    pairs (two coordinates each); overlapping or smaller sets change fewer coordinates, a
    marginal of that product, hence dominated by it. A product of dominating pairs dominates
    the composition (Zhu, Dong, Wang 2022, Theorem 10), so the round is charged as k
    compositions of the one-hot round at its epsilon."""
    if len(items) != len(offsets):
        raise PrivacyError(f"{len(items)} item counts for {len(offsets)} rounds")
    if not all(isinstance(k, int) and k >= 1 for k in items):
        raise PrivacyError(f"items per report must be integers >= 1, got {list(items)!r}")
    return tuple(float(o) for o, k in zip(offsets, items, strict=True) for _ in range(k))


def check_offsets(eps_local: float, offsets: Sequence[float] | None, rounds: int,
                  method: str) -> list[float]:
    """Every round's local epsilon under ``offsets`` (None: all eps_local); PrivacyError for
    a wrong length, a method other than "sum", or a round whose epsilon is not positive or is
    positive but below what a device's coins resolve (``_resolved``)."""
    if offsets is None or not len(offsets):
        return [eps_local] * rounds
    if len(offsets) != rounds:
        raise PrivacyError(f"{len(offsets)} allocation offsets for {rounds} rounds")
    if method != "sum" and any(o != 0 for o in offsets):
        raise PrivacyError(f"per-round allocations are accounted by the sum method only, "
                           f"not {method!r}")
    return [_resolved(check_eps_local(eps_local + float(o), f"eps_local of round {i + 1}"),
                      i + 1) for i, o in enumerate(offsets)]


# Far above the coins' floor (~9.31e-10): a round's epsilon above it needs no exact check.
_SURELY_RESOLVED = 1e-6


def _resolved(eps: float, round_: int) -> float:
    """``eps``, a round's positive local epsilon, where the device's randomized response tells
    a 0 from a 1 at it (``fedhh.device.randomizer.a0_threshold``: P[0 -> 1] = m / 2^32 below
    1/2); PrivacyError where it does not. An allocation's round runs at eps_local + ln(its
    weight), which an explicit eps_local (or the coordinator's max_eps_local) can leave just
    above 0: a completion round at 7.8e-11 (eps_local 1, --completion-weight 0.3678794412)
    ended `fedhh simulate` in a ZeroDivisionError (its estimator's scale 1 / (a1 - a0)); now
    the round is not budgeted, as one at 0 is not."""
    if eps >= _SURELY_RESOLVED:
        return eps
    from fedhh.device.randomizer import SCALE, a0_threshold

    if 2 * a0_threshold(eps) < SCALE:
        return eps
    raise PrivacyError(f"eps_local of round {round_} is {eps:g}, below what a device's coins "
                       "resolve (2^-32, at least 9.32e-10): its reports would carry nothing")


def window_order(orders: np.ndarray) -> float:
    """``max_order`` for the truncation windows: 4x the smallest useful order, in [32, 256]."""
    return float(min(256.0, max(32.0, 4.0 * float(np.min(orders)))))


def checked_setting(delta: float, rounds: int, num_devices: int, sampling_rate: float,
                    method: str) -> tuple[float, int, int, float, str, int]:
    """A run's setting as every accountant takes it, checked (``PrivacyError`` naming the
    figure), and its participants per round (``participants_for``)."""
    delta = check_delta(delta)
    rounds = check_rounds(rounds)
    num_devices = check_devices(num_devices)
    sampling_rate = check_rate(sampling_rate)
    method = methods.check_method(method)
    return (delta, rounds, num_devices, sampling_rate, method,
            participants_for(num_devices, sampling_rate, method))


def aggregate_epsilon(
    eps_local: float,
    delta: float,
    rounds: int,
    num_devices: int,
    sampling_rate: float = 1.0,
    method: str = methods.DEFAULT_METHOD,
    orders: np.ndarray | None = None,
    max_order: float = 256.0,
    offsets: Sequence[float] | None = None,
) -> AggregateEpsilon:
    """Aggregate (eps, delta)-DP of ``rounds`` rounds among ``num_devices`` devices (a bound).

    ``offsets``: a per-round allocation, round i at local epsilon eps_local + offsets[i]
    (``allocation_offsets``); accounted by the ``"sum"`` method only."""
    eps_local = check_eps_local(eps_local, "eps_local")
    delta, rounds, num_devices, sampling_rate, method, n = checked_setting(
        delta, rounds, num_devices, sampling_rate, method)
    sampled = sampling_rate < 1.0
    round_eps = check_offsets(eps_local, offsets, rounds, method)
    pure = sum_up(round_eps)  # basic composition of eps-LDP rounds (rounded up): always valid

    pld_eps = rdp_eps = adv_eps = math.inf
    rdp_order = eps_r = delta_r = slack = math.nan
    if method == "sum":
        pld_eps = sum_pld.sum_epsilon(
            round_eps, delta, [n] * rounds, num_devices if sampled else None
        )
    else:
        grid = np.asarray(ORDERS if orders is None else orders, dtype=float)
        # "clones" conditions on the participant count exactly; "paper" stacks Zhu-Wang.
        given_m = {"participants": n} if sampled and method == "clones" else {}
        shuffled = num_devices if given_m else n
        if shuffle.has_rdp(method):
            per_round = shuffle.round_rdp(eps_local, shuffled, method, grid, max_order, **given_m)
            if sampled and method == "paper":
                per_round = subsampled_rdp(grid, per_round, sampling_rate)
            conv = rdp_to_dp(grid, rounds * per_round, delta)
            rdp_eps, rdp_order = conv.epsilon, conv.order
        if not sampled or method == "clones":
            for split in delta_splits(delta, rounds):
                e_r = shuffle.round_epsilon(
                    eps_local, shuffled, method, split.per_round, max_order, **given_m
                )
                total = kov_epsilon(e_r, rounds, split.slack)
                if total < adv_eps:
                    adv_eps, eps_r, delta_r, slack = total, e_r, split.per_round, split.slack

    best = min(pld_eps, rdp_eps, adv_eps, pure)
    if best == pld_eps:
        tightest = "pld"
    elif best == rdp_eps:
        tightest = "rdp"
    else:
        tightest = "advanced-composition" if best == adv_eps else "pure"
    ok, notes = conditions(method, eps_local, sampling_rate)
    if any(e != eps_local for e in round_eps):
        notes = (*notes, "per-round allocation: local epsilons " +
                 ", ".join(f"{e:.4g}" for e in round_eps))
    return AggregateEpsilon(
        eps_agg=best,
        delta=delta,
        eps_local=eps_local,
        rounds=rounds,
        num_devices=num_devices,
        participants=n,
        sampling_rate=sampling_rate,
        method=method,
        tightest=tightest,
        rdp_epsilon=rdp_eps,
        rdp_order=rdp_order,
        advanced_epsilon=adv_eps,
        per_round_epsilon=eps_r,
        per_round_delta=delta_r,
        slack_delta=slack,
        conditions_verified=ok,
        notes=notes,
        pld_epsilon=pld_eps,
    )
