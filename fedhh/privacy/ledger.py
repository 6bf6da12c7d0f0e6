"""The per-run privacy ledger: a frozen value the coordinator persists and the simulator uses.

A run declares its target (eps_agg, delta), its number of rounds T, the minimum number of
contributors per round n_min (the aggregator releases nothing below it) and the sampling rate q;
``PrivacyLedger.open`` solves the per-round eps_local for them (shuffling among n_min reports,
or among round(q N) = n_min expected participants when q < 1) unless one is given, and refuses a
plan that does not fit.

What "spend" means. When a round's sum is released with ``contributors`` reports, its spend is
the round's per-round privacy curve at that contributor count: the RDP curve of the shuffle
(``accountant``; Zhu-Wang subsampled when q < 1) on the ledger's order grid, and, when q = 1,
the per-round epsilon at the plan's per-round delta (hockey-stick of the same reduction). For
contributors >= n_min the curve is the pointwise minimum of the bound at the actual count and at
n_min (the divergences are non-increasing in the number of reports, so both are valid).

The projected total after a round is the composition of the recorded rounds, this round, and
the remaining rounds at n_min: RDP curves add and convert with CKS20 Proposition 12; per-round
epsilons compose with KOV Theorem 3.4 at their maximum; the smaller wins. A round is refused
(``PrivacyError`` naming the figures) when its index is outside [0, T), was already recorded,
or the projected total would exceed eps_agg. ``check`` is the dry run; ``record`` returns a new
ledger and never mutates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fedhh.errors import PrivacyError
from fedhh.privacy import shuffle
from fedhh.privacy._checks import check_delta, check_devices, check_eps, check_rate, check_rounds
from fedhh.privacy.accountant import aggregate_epsilon, participants_for
from fedhh.privacy.composition import ORDERS, kov_epsilon, rdp_to_dp
from fedhh.privacy.solver import solve_local_epsilon
from fedhh.privacy.subsampling import subsampled_rdp

SLACK = 1e-9  # relative float tolerance when comparing a projected total with the target


@dataclass(frozen=True)
class RoundSpend:
    """The privacy spent by one released round."""

    round_index: int
    contributors: int
    rdp: tuple[float, ...]  # per-round RDP on the ledger's orders (inf where undefined)
    epsilon: float  # per-round eps at the ledger's per_round_delta (inf when not used)


@dataclass(frozen=True)
class SpendCheck:
    """Dry-run result of recording a round."""

    accepted: bool
    reason: str
    round_index: int
    contributors: int
    projected_epsilon: float
    target_epsilon: float
    spend: RoundSpend | None


def _enc(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _dec(x: float | None) -> float:
    return math.inf if x is None else float(x)


@dataclass(frozen=True)
class PrivacyLedger:
    """Declared budget of a run and the rounds spent so far (0-based round indices)."""

    eps_agg: float
    delta: float
    rounds: int
    n_min: int
    sampling_rate: float
    eps_local: float
    method: str
    per_round_delta: float  # delta of each round on the advanced-composition path (nan: unused)
    slack_delta: float  # KOV slack on that path
    orders: tuple[float, ...] = ORDERS
    spends: tuple[RoundSpend, ...] = field(default=())

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        eps_agg: float,
        delta: float,
        rounds: int,
        n_min: int,
        sampling_rate: float = 1.0,
        method: str = shuffle.DEFAULT_METHOD,
        eps_local: float | None = None,
    ) -> PrivacyLedger:
        """Declare a run; solve eps_local for n_min contributors unless it is given."""
        eps_agg = check_eps("eps_agg", eps_agg)
        delta = check_delta(delta)
        rounds = check_rounds(rounds)
        n_min = check_devices(n_min, "n_min")
        sampling_rate = check_rate(sampling_rate)
        method = shuffle.check_method(method)
        population = n_min if sampling_rate == 1.0 else math.ceil(n_min / sampling_rate)
        if eps_local is None:
            eps_local = solve_local_epsilon(
                eps_agg, delta, rounds, population, sampling_rate, method
            ).eps_local
        eps_local = check_eps("eps_local", eps_local)
        plan = aggregate_epsilon(eps_local, delta, rounds, population, sampling_rate, method)
        per_round_delta = plan.per_round_delta
        slack = plan.slack_delta
        ledger = cls(
            eps_agg=eps_agg,
            delta=delta,
            rounds=rounds,
            n_min=participants_for(population, sampling_rate),
            sampling_rate=sampling_rate,
            eps_local=eps_local,
            method=method,
            per_round_delta=per_round_delta,
            slack_delta=slack,
        )
        planned = ledger.projected_epsilon()
        if planned > eps_agg * (1.0 + SLACK):
            raise PrivacyError(
                f"plan exceeds the budget: eps_local={eps_local} over {rounds} rounds with "
                f"n_min={ledger.n_min} gives eps_agg={planned:.6g} > {eps_agg} (delta={delta})"
            )
        return ledger

    # ---- per-round curves ------------------------------------------------------------------
    def _curve(self, contributors: int) -> RoundSpend:
        grid = np.asarray(self.orders, dtype=float)
        counts = [contributors] if contributors < self.n_min else [contributors, self.n_min]
        rdp = np.full(grid.shape, math.inf)
        eps = math.inf
        for n in counts:
            if shuffle.has_rdp(self.method):
                curve = shuffle.round_rdp(self.eps_local, n, self.method, grid)
                if self.sampling_rate < 1.0:
                    curve = subsampled_rdp(grid, curve, self.sampling_rate)
                rdp = np.minimum(rdp, curve)
            if self.sampling_rate == 1.0 and math.isfinite(self.per_round_delta):
                eps = min(
                    eps, shuffle.round_epsilon(self.eps_local, n, self.method, self.per_round_delta)
                )
        eps = min(eps, self.eps_local)  # a round is always eps_local-DP (post-processing)
        return RoundSpend(-1, contributors, tuple(float(x) for x in rdp), eps)

    def _compose(self, spends: list[RoundSpend]) -> float:
        if not spends:
            return 0.0
        grid = np.asarray(self.orders, dtype=float)
        total = np.sum([np.asarray(s.rdp) for s in spends], axis=0)
        best = math.inf
        if np.any(np.isfinite(total)):
            best = rdp_to_dp(grid, total, self.delta).epsilon
        k = len(spends)
        worst = max(s.epsilon for s in spends)
        if math.isfinite(worst) and math.isfinite(self.per_round_delta):
            best = min(best, kov_epsilon(worst, k, self.slack_delta if k > 1 else 0.0))
        return best

    # ---- queries ---------------------------------------------------------------------------
    @property
    def rounds_recorded(self) -> int:
        return len(self.spends)

    def spent_epsilon(self) -> float:
        """Aggregate epsilon (at this ledger's delta) of the rounds recorded so far."""
        return self._compose(list(self.spends))

    def projected_epsilon(self, extra: RoundSpend | None = None) -> float:
        """Recorded rounds (+ ``extra``) plus the remaining rounds at n_min, composed."""
        spends = list(self.spends) + ([extra] if extra is not None else [])
        remaining = self.rounds - len(spends)
        if remaining > 0:
            spends += [self._curve(self.n_min)] * remaining
        return self._compose(spends)

    def check(self, round_index: int, contributors: int) -> SpendCheck:
        """Dry run of ``record``: whether the round would be accepted, and the figures."""
        target = self.eps_agg
        if isinstance(round_index, bool) or int(round_index) != round_index:
            raise PrivacyError(f"round_index must be an integer, got {round_index}")
        if isinstance(contributors, bool) or int(contributors) != contributors or contributors < 1:
            raise PrivacyError(f"contributors must be an integer >= 1, got {contributors}")
        round_index, contributors = int(round_index), int(contributors)

        def refuse(reason: str, projected: float = math.nan) -> SpendCheck:
            return SpendCheck(False, reason, round_index, contributors, projected, target, None)

        if not 0 <= round_index < self.rounds:
            return refuse(
                f"round {round_index} is outside the declared rounds 0..{self.rounds - 1}"
            )
        if any(s.round_index == round_index for s in self.spends):
            return refuse(f"round {round_index} was already recorded")
        if len(self.spends) >= self.rounds:
            return refuse(f"all {self.rounds} declared rounds are already recorded")
        if contributors < 2:
            return refuse(f"round {round_index} has {contributors} contributor(s): no shuffle")
        spend = replace(self._curve(contributors), round_index=round_index)
        projected = self.projected_epsilon(spend)
        if projected > target * (1.0 + SLACK):
            return refuse(
                f"round {round_index} with {contributors} contributors (n_min={self.n_min}) "
                f"would bring the projected eps_agg to {projected:.6g} > budget {target} "
                f"(delta={self.delta}, eps_local={self.eps_local:.6g})",
                projected,
            )
        return SpendCheck(True, "ok", round_index, contributors, projected, target, spend)

    def record(self, round_index: int, contributors: int) -> PrivacyLedger:
        """A new ledger with the round's spend recorded; PrivacyError if it would not fit."""
        result = self.check(round_index, contributors)
        if not result.accepted or result.spend is None:
            raise PrivacyError(f"privacy budget refused: {result.reason}")
        return replace(self, spends=(*self.spends, result.spend))

    # ---- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (non-finite numbers become None)."""
        return {
            "eps_agg": self.eps_agg,
            "delta": self.delta,
            "rounds": self.rounds,
            "n_min": self.n_min,
            "sampling_rate": self.sampling_rate,
            "eps_local": self.eps_local,
            "method": self.method,
            "per_round_delta": _enc(self.per_round_delta),
            "slack_delta": _enc(self.slack_delta),
            "orders": list(self.orders),
            "spends": [
                {
                    "round_index": s.round_index,
                    "contributors": s.contributors,
                    "rdp": [_enc(x) for x in s.rdp],
                    "epsilon": _enc(s.epsilon),
                }
                for s in self.spends
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyLedger:
        """Inverse of ``to_dict``; validates the declared figures."""
        try:
            per_round = data["per_round_delta"]
            slack = data["slack_delta"]
            return cls(
                eps_agg=check_eps("eps_agg", data["eps_agg"]),
                delta=check_delta(data["delta"]),
                rounds=check_rounds(data["rounds"]),
                n_min=check_devices(data["n_min"], "n_min"),
                sampling_rate=check_rate(data["sampling_rate"]),
                eps_local=check_eps("eps_local", data["eps_local"]),
                method=shuffle.check_method(data["method"]),
                per_round_delta=math.nan if per_round is None else float(per_round),
                slack_delta=math.nan if slack is None else float(slack),
                orders=tuple(float(a) for a in data["orders"]),
                spends=tuple(
                    RoundSpend(
                        int(s["round_index"]),
                        int(s["contributors"]),
                        tuple(_dec(x) for x in s["rdp"]),
                        _dec(s["epsilon"]),
                    )
                    for s in data["spends"]
                ),
            )
        except (KeyError, TypeError) as error:
            raise PrivacyError(f"malformed ledger: {error!r}") from error
