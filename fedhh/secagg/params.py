"""Choosing the graph degree k, the Shamir threshold t and the modulus, with failure bounds.

Model (the idea of FCP's Harary graph parameter finder, re-derived here). The cohort has n devices;
at most C = floor(gamma * n) are corrupt (they collude with the server), chosen before the graph
seed is revealed; every device independently drops out of the round with probability delta,
independently of the graph. The neighbourhood of a device is a uniformly random k-subset of the
other n - 1 devices (graph.py), so for an honest device u:

* its corrupt neighbours H_u ~ Hypergeometric(n - 1, C, k);
* its surviving neighbours S_u ~ Binomial(k, 1 - delta).

Bad events, each bounded by a union bound over the n devices:

* **privacy** (curious server): corrupt neighbours alone hold t shares of an honest device's two
  secrets, i.e. H_u >= t. With a *lying* server, which can ask some honest neighbours for b-shares
  and the others for s-shares of the same device, both secrets leak iff H_u + (k - H_u) / 2 >= t,
  i.e. H_u >= 2t - k (the spec's t > (k + c) / 2).
  Bound: n * P[H_u >= t] (curious), n * P[H_u >= 2t - k] (lying).
* **disconnection**: the honest surviving devices must stay connected in the mask graph, or the
  server learns the sum of each component. Removing nodes disconnects a ring Harary graph only if
  two disjoint runs of k/2 consecutive ring positions are all removed (corrupt or dropped).
  There are at most n^2/2 such pairs of runs, and k given positions are all removed with
  probability E[delta^(k - J)], J ~ Hypergeometric(n, C, k). Bound: n^2/2 * E[delta^(k - J)].
  (0 for the complete graph.)
* **robustness** (the round aborts): some device keeps fewer than t surviving neighbours, so one of
  its secrets cannot be reconstructed. Bound: n * P[S_u <= t - 1].

:func:`choose_parameters` returns the smallest even k (device cost is linear in k) for which some
t makes privacy + disconnection <= 2^-security_bits and robustness <= 2^-robustness_bits, with the
smallest such t (cheapest reconstruction, most robust); the complete graph k = n - 1 if no
Harary degree works. Dropouts are assumed independent of the graph; a server that chooses whom
to drop is discussed in docs/secagg.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.graph import check_graph_parameters

__all__ = [
    "DEVICES_CHECK",
    "DevicesCheck",
    "FailureBounds",
    "SecAggParameters",
    "Threat",
    "choose_parameters",
    "failure_bounds",
    "modulus_bits_for",
]

_MAX_SEARCH_DEGREE = 2000  # beyond this, fall back to the complete graph if n is small enough
_MAX_COMPLETE_GRAPH = 5000


class Threat(StrEnum):
    """Which server the parameters must withstand."""

    CURIOUS = "curious"  # follows the protocol, colludes with the corrupt devices
    LYING = "lying"  # also lies about which devices dropped out ("semi-malicious")


@dataclass(frozen=True)
class FailureBounds:
    """Upper bounds on the probabilities of the bad events of one round (module docstring)."""

    privacy: float
    disconnection: float
    robustness: float

    @property
    def security(self) -> float:
        """Bound on the probability that the adversary learns more than the sum."""
        return self.privacy + self.disconnection


@dataclass(frozen=True)
class SecAggParameters:
    """A parameter choice and its failure bounds; feed k, t, modulus_bits to RoundConfig."""

    n: int
    k: int
    t: int
    modulus_bits: int
    dropout: float
    corrupt: float
    threat: Threat
    bounds: FailureBounds


@dataclass(frozen=True)
class DevicesCheck:
    """The rates at which every device recomputes the lying-server bound of the (n, k, t) it is
    sent, privacy plus disconnection, and refuses the round above 2^-security_bits
    (``DevicePolicy``): its assumed dropout rate, which only enters the disconnection term and
    is the cautious one, and the corrupt fraction it tolerates. A coordinator that chooses
    (k, t) for a lower expected dropout or corrupt fraction than these must meet them too, or
    every device refuses every round: (n, k, t) = (1000, 32, 25), chosen for 1% dropout, is
    2.9e-10 at 30%."""

    dropout: float = 0.3
    corrupt: float = 0.05


DEVICES_CHECK = DevicesCheck()  # the shipped devices' (fedhh_device.secagg_run.Floors, web)


def modulus_bits_for(n: int) -> int:
    """The smallest b in {16, 32} with 2^b > n (a sum of n bits cannot wrap)."""
    if n < 1:
        raise SecAggConfigError(f"n must be >= 1, got {n}")
    if n < 1 << 16:
        return 16
    if n < 1 << 32:
        return 32
    raise SecAggConfigError(f"n must be < 2^32 for a 32-bit modulus, got {n}")


def _log_comb(a: int, b: int) -> float:
    return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)


def _hypergeometric_pmf(population: int, successes: int, draws: int) -> list[float]:
    """P[J = j] for j = 0..draws, J ~ Hypergeometric(population, successes, draws)."""
    total = _log_comb(population, draws)
    failures = population - successes
    return [
        math.exp(_log_comb(successes, j) + _log_comb(failures, draws - j) - total)
        if j <= successes and draws - j <= failures else 0.0
        for j in range(draws + 1)
    ]


def _binomial_pmf(trials: int, p: float) -> list[float]:
    """P[S = s] for s = 0..trials, S ~ Binomial(trials, p)."""
    if p <= 0.0:
        return [1.0] + [0.0] * trials
    if p >= 1.0:
        return [0.0] * trials + [1.0]
    lp, lq = math.log(p), math.log1p(-p)
    return [math.exp(_log_comb(trials, s) + s * lp + (trials - s) * lq) for s in range(trials + 1)]


def _check_rates(dropout: float, corrupt: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise SecAggConfigError(f"dropout must be in [0, 1), got {dropout}")
    if not 0.0 <= corrupt < 1.0:
        raise SecAggConfigError(f"corrupt must be in [0, 1), got {corrupt}")


class _Tails:
    """The distributions of one (n, k): upper tails of H_u, lower tails of S_u."""

    def __init__(self, n: int, k: int, dropout: float, corrupt: float) -> None:
        self.n, self.k = n, k
        n_corrupt = math.floor(corrupt * n + 1e-9)
        pmf_h = _hypergeometric_pmf(n - 1, n_corrupt, k)
        self.h_at_least = [0.0] * (k + 2)  # h_at_least[x] = P[H_u >= x]
        for x in range(k, -1, -1):
            self.h_at_least[x] = self.h_at_least[x + 1] + pmf_h[x]
        pmf_s = _binomial_pmf(k, 1.0 - dropout)
        self.s_below = [0.0] * (k + 2)  # s_below[t] = P[S_u <= t - 1]
        for t in range(1, k + 2):
            self.s_below[t] = self.s_below[t - 1] + pmf_s[t - 1]
        if k == n - 1:
            self.disconnection = 0.0
        else:
            pmf_j = _hypergeometric_pmf(n, n_corrupt, k)
            all_bad = sum(p * dropout ** (k - j) for j, p in enumerate(pmf_j))
            self.disconnection = min(1.0, n * n / 2 * all_bad)

    def privacy(self, t: int, threat: Threat) -> float:
        x = t if threat is Threat.CURIOUS else 2 * t - self.k
        return min(1.0, self.n * self.h_at_least[max(0, x)])

    def robustness(self, t: int) -> float:
        return min(1.0, self.n * self.s_below[t])


def failure_bounds(n: int, k: int, t: int, dropout: float, corrupt: float,
                   threat: Threat = Threat.CURIOUS) -> FailureBounds:
    """The failure bounds of any (n, k, t) under the module's model."""
    check_graph_parameters(n, k)
    _check_rates(dropout, corrupt)
    if not 1 <= t <= k:
        raise SecAggConfigError(f"t must be in [1, k] = [1, {k}], got {t}")
    tails = _Tails(n, k, dropout, corrupt)
    return FailureBounds(tails.privacy(t, Threat(threat)), tails.disconnection,
                         tails.robustness(t))


def choose_parameters(n: int, dropout: float, corrupt: float,
                      threat: Threat | str = Threat.CURIOUS, *, security_bits: float = 40.0,
                      robustness_bits: float = 20.0,
                      devices: DevicesCheck | None = None) -> SecAggParameters:
    """The cheapest (k, t) meeting both targets (module docstring), with its bounds; with
    ``devices``, also the lying-server security target at the devices' own rates (what each
    device checks before it takes part, :class:`DevicesCheck`). The privacy bound falls and the
    robustness bound rises with t, so the smallest t meeting both security targets is still
    the one to try for robustness; where the devices' rates are no higher than the run's, the
    choice is the same as without them.

    Raises :class:`SecAggConfigError` if no degree up to the complete graph meets them.
    """
    threat = Threat(threat)
    _check_rates(dropout, corrupt)
    if devices is not None:
        _check_rates(devices.dropout, devices.corrupt)
    if n < 3:
        raise SecAggConfigError(f"n must be >= 3 to choose parameters, got {n}")
    security_target = 2.0 ** -security_bits
    robustness_target = 2.0 ** -robustness_bits
    bits = modulus_bits_for(n)
    candidates = list(range(2, min(n - 1, _MAX_SEARCH_DEGREE + 1), 2))
    if n - 1 <= _MAX_COMPLETE_GRAPH:
        candidates.append(n - 1)
    for k in candidates:
        tails = _Tails(n, k, dropout, corrupt)
        if tails.disconnection >= security_target:
            continue
        checked = None if devices is None else _Tails(n, k, devices.dropout, devices.corrupt)
        if checked is not None and checked.disconnection >= security_target:
            continue
        for t in range(2, k + 1):
            privacy = tails.privacy(t, threat)
            if privacy + tails.disconnection <= security_target and (
                    checked is None
                    or checked.privacy(t, Threat.LYING) + checked.disconnection
                    <= security_target):
                robustness = tails.robustness(t)
                if robustness <= robustness_target:
                    bounds = FailureBounds(privacy, tails.disconnection, robustness)
                    return SecAggParameters(n, k, t, bits, dropout, corrupt, threat, bounds)
                break  # larger t only hurts robustness
    raise SecAggConfigError(
        f"no (k, t) for n={n}, dropout={dropout}, corrupt={corrupt}, threat={threat.value} "
        f"meets 2^-{security_bits} security and 2^-{robustness_bits} robustness")
