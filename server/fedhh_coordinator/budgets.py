"""Lifetime privacy budgets: what every device has spent across runs over a rolling period.

A run's ledger keeps that run within its (eps_agg, delta); nothing in it stops a second and a
third run over the same devices. The coordinator therefore also keeps, per device, the runs it
took part in: a device admitted to any cohort of a run is charged that run's whole target
(eps_agg, delta), once. By basic composition (Dwork and Roth, *The Algorithmic Foundations of
Differential Privacy*, 2014, Theorem 3.16: k mechanisms that are (eps_i, delta_i)-DP are
together (sum eps_i, sum delta_i)-DP), a device's guarantee over the period is the sum of its
charges. A run whose own target exceeds the lifetime budget is refused when it is started; a
device whose charges plus the run's target would exceed the budget is not admitted to the run's
cohorts (it gets no task).

The charge is the run's target, made when a device is admitted, before anything is spent: the
safe side while the run's spend stays within its target, which its ledger ensures for every
charge it accepts. A charge that is a fact (an attempt that reached unmasking) is recorded even
past the target (``PrivacyLedger.record(..., force=True)``; the run then stops), so a run can
end ``overspent``; ``settle_run_charge``, called by the runner when a run ends however it ends,
then raises its devices' charges to the ledger's ``spent_epsilon()`` (at the run's delta).
Before, they stayed at the target, below what the ledger said the devices had spent.

The sums are exact, of the doubles stored, and compared with the budget without tolerance
(``fedhh.device.budget_sums``; docs/privacy.md, "Budgets are compared exactly"): ten runs of
eps 0.1 exceed a lifetime eps of 1.0, as the devices' own budgets decide. Before, SQL's SUM of
the charges (rounded, and differently by SQLite and PostgreSQL) was compared with the budget
times 1 + 1e-9.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from fedhh.device.budget_sums import exceeds, exceeds_in_words
from fedhh.errors import ConfigError, PrivacyError
from fedhh.privacy.ledger import PrivacyLedger
from fedhh_coordinator.store import Store


@dataclass(frozen=True)
class LifetimeBudget:
    """Each device may spend at most (eps, delta) over any ``period_s`` seconds."""

    eps: float = 10.0
    delta: float = 1e-5
    period_s: float = 30 * 24 * 3600.0

    def __post_init__(self) -> None:
        if not self.eps > 0 or not 0 < self.delta < 1 or not self.period_s > 0:
            raise ConfigError(f"a lifetime budget needs eps > 0, 0 < delta < 1 and a positive "
                              f"period, got {self.eps}, {self.delta}, {self.period_s} s")

    def over(self, charges: list[tuple[float, float, int]], eps_agg: float, delta: float
             ) -> bool:
        """Whether ``charges`` ((eps, delta, times) each) and a run of (eps_agg, delta) would
        exceed the budget: either exact sum above its part (Theorem 3.16)."""
        return any(exceeds(terms, cap) for terms, cap, _ in self._parts(charges, eps_agg, delta))

    def hidden_excess(self, charges: list[tuple[float, float, int]], eps_agg: float,
                      delta: float) -> str | None:
        """Where ``charges`` and the run exceed the budget only exactly, their float sum
        within it (ten runs of 0.1 under 1.0: 0.9999999999999999), that excess in words
        (``exceeds_in_words``); None otherwise."""
        for terms, cap, name in self._parts(charges, eps_agg, delta):
            if exceeds(terms, cap) and _float_sum_within(terms, cap):
                return f"{name}: {exceeds_in_words(terms, cap)}"
        return None

    def _parts(self, charges: list[tuple[float, float, int]], eps_agg: float, delta: float
               ) -> list[tuple[list[float], float, str]]:
        return [([eps_agg, *(e for e, _, k in charges for _ in range(k))], self.eps, "eps"),
                ([delta, *(d for _, d, k in charges for _ in range(k))], self.delta, "delta")]

    def check_run(self, eps_agg: float, delta: float) -> None:
        if eps_agg > self.eps or delta > self.delta:
            raise PrivacyError(f"a run of (eps {eps_agg}, delta {delta}) exceeds every device's "
                               f"lifetime budget (eps {self.eps}, delta {self.delta} per "
                               f"{self.period_s / 86400:g} days)")


class RunAdmission:
    """Which devices one run may admit, and their charges (built when the run starts)."""

    def __init__(self, store: Store, budget: LifetimeBudget, run_id: str, eps_agg: float,
                 delta: float) -> None:
        budget.check_run(eps_agg, delta)
        self.store, self.run_id, self.budget = store, run_id, budget
        self.eps_agg, self.delta = eps_agg, delta
        terms = store.device_spend_terms(time.time() - budget.period_s, exclude_run=run_id)
        decided: dict[tuple[tuple[float, float, int], ...], bool] = {}  # (devices share runs)
        self.refused: set[int] = set()
        self.hidden: tuple[int, int, str] | None = None  # (device, runs, hidden_excess)
        for device, charges in terms.items():
            key = tuple(sorted(charges))
            if key not in decided:
                decided[key] = budget.over(charges, eps_agg, delta)
                hidden = budget.hidden_excess(charges, eps_agg, delta)
                if hidden is not None and self.hidden is None:
                    self.hidden = device, sum(k for _, _, k in charges), hidden
            if decided[key]:
                self.refused.add(device)

    def eligible(self, device_id: int) -> bool:
        return device_id not in self.refused

    def shortfall(self) -> str:
        """Why devices that check in may not count, for a check-in that gathered too few:
        those whose lifetime budget cannot pay for this run (they poll, and are refused; the
        abort said only "0 devices checked in" while 2,000 devices were there)."""
        if not self.refused:
            return ""
        # (the figures as repr, as the exact comparison's words and check_run write them:
        # before, "may spend eps 1" and "above the cap 1.0" in one abort, and a run of eps
        # 1.0000001 read as "eps 1")
        return (f"; {len(self.refused)} enrolled devices have too little of their lifetime "
                f"budget left for this run's (eps {self.eps_agg!r}, delta {self.delta!r}): "
                f"each may spend eps {self.budget.eps!r}, delta {self.budget.delta!r} per "
                f"{self.budget.period_s / 86400:g} days (--lifetime-eps, --lifetime-delta)"
                + self._hidden_words())

    def _hidden_words(self) -> str:
        if self.hidden is None:
            return ""
        device, runs, words = self.hidden
        return (f"; device {device}'s {runs} charges and this run's are compared exactly, "
                f"{words}")

    def charge(self, device_ids: list[int]) -> None:
        self.store.charge_devices(self.run_id, device_ids, self.eps_agg, self.delta)


def settle_run_charge(store: Store, run_id: str, ledger: PrivacyLedger | None) -> float | None:
    """After a run: if its ledger ended above its target (``overspent``, a forced charge), raise
    its devices' lifetime charges to its ``spent_epsilon()`` and return that figure; None when
    the target covers the spend (module docstring; Theorem 3.16 then sums the real charges)."""
    if ledger is None or not ledger.overspent:
        return None
    spent = ledger.spent_epsilon()
    store.raise_run_charge(run_id, spent)
    return spent


def _float_sum_within(terms: list[float], cap: float) -> bool:
    """Whether the correctly rounded sum of ``terms`` is at most ``cap``. A sum past the largest
    double is not (before, fsum's OverflowError ended the check-in's refusal)."""
    try:
        return math.fsum(terms) <= cap
    except OverflowError:
        return False
