"""Composition over rounds and conversion to (eps, delta)-DP.

Two routes, and every caller takes the tighter:

* Renyi DP (RDP): per-round RDP curves add up (Mironov 2017, "Renyi Differential Privacy",
  Proposition 1), and a composed curve converts to (eps, delta) by Canonne, Kamath, Steinke 2020,
  "The Discrete Gaussian for Differential Privacy", Proposition 12 (arXiv v4):
  ``eps = rdp(a) + log((a - 1) / a) - (log(delta) + log(a)) / (a - 1)``, minimised over the
  order grid. The conversion is Google's ``dp_accounting`` (``compute_epsilon``), which implements
  exactly this formula (plus the KL bound ``delta <= sqrt(1 - exp(-rdp))`` for tiny divergences).
* Advanced composition of per-round (eps, delta) guarantees: Kairouz, Oh, Viswanath 2015/2017,
  "The Composition Theorem for Differential Privacy", Theorem 3.4 (ICML 2015 numbering):
  k-fold adaptive composition of (eps, delta)-DP mechanisms is
  (eps_k, 1 - (1 - delta)^k (1 - delta_slack))-DP for every delta_slack in (0, 1], with
  ``eps_k = min{k eps, (e^eps - 1) eps k / (e^eps + 1) + eps sqrt(2 k log(e + sqrt(k eps^2) /
  delta_slack)), (e^eps - 1) eps k / (e^eps + 1) + eps sqrt(2 k log(1 / delta_slack))}``.
  (The first term, basic composition, needs no slack: then the total delta is 1 - (1-delta)^k.)
* Basic composition of heterogeneous guarantees (``basic_composition``): Dwork & Roth 2014,
  "The Algorithmic Foundations of Differential Privacy", Theorem 3.16 -- mechanisms that are
  (eps_i, delta_i)-DP compose (adaptively) to (sum eps_i, sum delta_i)-DP. Used for a device's
  lifetime budget over several runs.

The order grid. RDP orders used everywhere: ``ORDERS`` below (1.25 to 256). The largest order
that can matter is where ``log(1/delta) / (a - 1)`` falls under the target; for delta = 1e-6 and
targets down to 0.1 that is below 256. Integer orders are a subset (Zhu-Wang subsampling needs
them). A caller may pass its own grid.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fedhh.device.budget_sums import exact_sum
from fedhh.errors import PrivacyError
from fedhh.privacy._checks import check_delta, check_rounds

ORDERS: tuple[float, ...] = (
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0, 16.0,
    20.0, 24.0, 28.0, 32.0, 40.0, 48.0, 56.0, 64.0, 80.0, 96.0, 112.0, 128.0, 160.0, 192.0,
    224.0, 256.0,
)  # fmt: skip

# Fractions of delta reserved for the advanced-composition slack; 0 means basic composition.
SLACK_FRACTIONS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9)


@dataclass(frozen=True)
class RdpConversion:
    """Result of converting a composed RDP curve with CKS20 Proposition 12."""

    epsilon: float
    order: float


def rdp_to_dp(
    orders: Sequence[float] | np.ndarray, rdp: Sequence[float] | np.ndarray, delta: float
) -> RdpConversion:
    """(eps, delta) from an RDP curve: CKS20 Proposition 12 via ``dp_accounting``.

    ``rdp`` is the (already composed) curve at ``orders``; the result is the smallest eps over
    the grid and the order achieving it.
    """
    from dp_accounting.rdp import rdp_privacy_accountant

    check_delta(delta)
    values = [float(r) if math.isfinite(r) else math.inf for r in rdp]
    eps, order = rdp_privacy_accountant.compute_epsilon(list(orders), values, delta)
    return RdpConversion(epsilon=float(eps), order=float(order))


def cks_epsilons(orders: np.ndarray, rdp: np.ndarray, delta: float) -> np.ndarray:
    """Per-order CKS20 Proposition 12 epsilons (for reporting; the min is ``rdp_to_dp``)."""
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp, dtype=float)
    return r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)


def kov_epsilon(eps: float, k: int, delta_slack: float) -> float:
    """KOV Theorem 3.4: composed epsilon of k (eps, .)-DP rounds with slack ``delta_slack``.

    ``delta_slack = 0`` allows only the basic-composition term ``k * eps``.
    """
    if eps <= 0:
        return 0.0
    # (rounded up, as ``sum_up``: k * eps in floats can land below the exact product, and
    # kov_inverse's shares then added back to above eps_total)
    basic = times_up(k, eps) if math.isfinite(eps) else math.inf
    if delta_slack <= 0:
        return basic
    head = math.expm1(eps) * eps * k / (math.exp(eps) + 1.0)
    second = head + eps * math.sqrt(
        2 * k * math.log(math.e + math.sqrt(k * eps * eps) / delta_slack)
    )
    third = head + eps * math.sqrt(2 * k * math.log(1.0 / delta_slack))
    return min(basic, second, third)


def kov_inverse(eps_total: float, k: int, delta_slack: float) -> float:
    """Largest per-round eps whose KOV composition stays within ``eps_total`` (bisection).

    KOV's bound is increasing in the per-round eps, so bisection on [0, eps_total] is exact to
    1e-12 relative. Its basic term is compared exactly (``kov_epsilon``): k of the eps
    returned add up to at most ``eps_total`` (before, 10 of 0.1 were taken within 1.0).
    """
    lo, hi = 0.0, eps_total
    if kov_epsilon(hi, k, delta_slack) <= eps_total:
        return hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if kov_epsilon(mid, k, delta_slack) <= eps_total:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return lo


@dataclass(frozen=True)
class DeltaSplit:
    """How a total delta is shared between T rounds and the KOV slack."""

    per_round: float
    slack: float
    fraction: float


def delta_splits(delta: float, rounds: int) -> list[DeltaSplit]:
    """Candidate splits with ``1 - (1 - per_round)^T (1 - slack) = delta`` (KOV's total delta).

    ``fraction`` of delta goes to the slack; fraction 0 means basic composition (no slack).
    """
    check_delta(delta)
    check_rounds(rounds)
    out = []
    for f in SLACK_FRACTIONS:
        if rounds == 1 and f > 0:
            continue  # one round: the slack buys nothing
        slack = f * delta
        # (1 - per_round)^T = (1 - delta) / (1 - slack)
        log_keep = (math.log1p(-delta) - math.log1p(-slack)) / rounds
        per_round = -math.expm1(log_keep)
        out.append(DeltaSplit(per_round=per_round, slack=slack, fraction=f))
    return out


def sum_up(values: Iterable[float]) -> float:
    """The smallest double at or above the exact sum of ``values`` (finite doubles).

    A bound composed by adding (basic composition, Dwork & Roth 2014, Theorem 3.16) must not
    come out below the sum of its terms, and a float sum rounds to nearest: ten times 0.1 added
    in floats is 0.9999999999999999, below the exact 10 x 0.1000000000000000055511151231257827.
    Each double is a dyadic rational, so the sum is taken exactly (equal terms counted once)
    and rounded up."""
    return rounded_up(exact_sum(values))


def times_up(k: int, value: float) -> float:
    """The smallest double at or above the exact ``k * value`` (finite): k rounds of one
    term composed by adding (Theorem 3.16), as ``sum_up`` of k copies without the k copies
    (kov_inverse calls it up to 200 times, for up to 2^20 rounds)."""
    return rounded_up(Fraction(value) * k)


def rounded_up(exact: Fraction) -> float:
    """The smallest double at or above ``exact``: a bound (an epsilon, a noise scale) that
    must not come out on the wrong side of its exact value when rounded to a double."""
    try:
        total = float(exact)  # correctly rounded to nearest
    except OverflowError:  # past the largest double (before: OverflowError, a traceback;
        # a float sum gave inf): rounded up, inf, or the most negative double below it
        return math.inf if exact > 0 else -sys.float_info.max
    if Fraction(total) < exact:
        total = math.nextafter(total, math.inf)
    return total


def share_down(total: float | Fraction, parts: int) -> float:
    """The largest double whose exact ``parts``-fold sum is at most ``total``: ``total`` split
    into equal per-round shares that basic composition (Dwork & Roth 2014, Theorem 3.16) adds
    back to no more than it. ``total / parts`` rounds to nearest, and can round up: 1.0 / 10 is
    0.1000000000000000055, and ten of those exceed 1.0 (docs/privacy.md, "Budgets are
    compared exactly")."""
    exact = Fraction(total) / parts
    share = float(exact)  # correctly rounded to nearest
    if Fraction(share) > exact:
        share = math.nextafter(share, -math.inf)
    return share


def basic_composition(guarantees: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(sum of eps, sum of delta) of several (eps, delta)-DP guarantees of one device.

    Dwork & Roth 2014, Theorem 3.16 (basic composition, adaptive): if each run is
    (eps_i, delta_i)-DP for the device, the runs together are (sum eps_i, sum delta_i)-DP.
    An empty sequence is (0, 0). Each eps must be a finite number >= 0 and each delta in [0, 1];
    a total delta of 1 or more is refused (it guarantees nothing). Both sums are rounded up
    (``sum_up``), never below the exact sums.
    """
    epsilons: list[float] = []
    deltas: list[float] = []
    for index, item in enumerate(guarantees):
        try:
            eps, delta = (float(x) for x in item)
        except (TypeError, ValueError):
            raise PrivacyError(f"guarantee {index} must be an (eps, delta) pair, got {item!r}"
                               ) from None
        if not (math.isfinite(eps) and eps >= 0):
            raise PrivacyError(f"guarantee {index}: eps must be finite and >= 0, got {eps}")
        if not 0.0 <= delta <= 1.0:
            raise PrivacyError(f"guarantee {index}: delta must be in [0, 1], got {delta}")
        epsilons.append(eps)
        deltas.append(delta)
    total_eps, total_delta = sum_up(epsilons), sum_up(deltas)
    if total_delta >= 1.0:
        raise PrivacyError(f"the composed delta {total_delta} is >= 1: no guarantee")
    return total_eps, total_delta
