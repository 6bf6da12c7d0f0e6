"""The per-run privacy ledger: a frozen value the coordinator persists and the simulator uses.

A run declares its target (eps_agg, delta), its number of rounds T, the minimum number of
contributors per round n_min (the aggregator releases nothing below it) and the sampling rate q;
``PrivacyLedger.open`` solves the per-round eps_local for them (for n_min contributors, or for
round(q N) = n_min expected participants of N devices when q < 1) unless one is given, and
refuses a plan that does not fit.

Charges. A round is charged when one of its attempts reaches unmasking, before its sum is read,
with the contributor count that attempt really had. If that sum is lost and the round is retried,
the retry is charged too: ``record(round, contributors, attempt=k)`` with an attempt number
larger than every one already charged for the round. The attempts of a round all carry the same
report from each device, so they are not independent rounds (the same coins seen through two
sums can leak more than two fresh rounds): a round charged once composes as the sum at its
count; a round charged twice or more composes as one report released alone
(``sum_pld.report_pld``, the device's eps_local-LDP report: every attempt's sum is a
post-processing of it), in place of its charges. ``rounds_recorded`` counts distinct rounds
charged, ``charges`` every charge.

What a charge costs depends on the method. ``"sum"``: the round's privacy loss distribution at
its contributor count (``sum_pld``; given the participant count when q < 1), all charges composed
exactly. Shuffle methods: the round's RDP curve on the ledger's order grid and, without
sampling, its epsilon at the plan's per-round delta; for counts >= n_min the pointwise minimum
with the n_min curve (shuffling more reports is a post-processing of shuffling fewer); composed
by adding RDP (CKS20 Proposition 12) and by KOV Theorem 3.4 at the largest per-round epsilon,
the smaller wins.

A per-round allocation (``offsets``, method ``"sum"`` only, issue 15) runs and charges round i at
local epsilon eps_local + offsets[i] (``round_epsilon``; offsets <= 0, so eps_local is the largest
round's); every charge composes at its round's epsilon.

The projection after a charge is every charge so far, this one, and the rounds not yet charged
at n_min. A charge is refused (``PrivacyError`` naming the figures) when its round is outside
[0, T), is charged again without a larger attempt number, or the projection would exceed
eps_agg. The projection (an upper bound, in floats) is compared with eps_agg as declared, with
no tolerance (before, one 1e-9 of eps_agg above it was let through; docs/privacy.md, "Budgets
are compared exactly"). ``check`` is the dry run; ``record`` returns a new ledger and never
mutates.

A sampled run's ``population`` is at least ``n_min`` (``PrivacyError`` otherwise, declared or
stored): no round drawn from fewer devices reaches n_min contributors.

Persistence: ``to_dict``/``from_dict`` (JSON-ready, ``version`` 2). Version-1 dicts (no
``version`` key, written before attempts existed) still load: method ``"exact"`` is the shuffle
method now called ``"clones"``, their charges have no attempt number, and the population of a
sampled run is taken as ceil(n_min / q).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fedhh.errors import PrivacyError, shown
from fedhh.privacy import methods, shuffle, sum_pld
from fedhh.privacy._checks import check_delta, check_devices, check_eps, check_rate, check_rounds
from fedhh.privacy.accountant import (
    aggregate_epsilon,
    check_offsets,
    participants_for,
    repeat_offsets,
)
from fedhh.privacy.composition import ORDERS, kov_epsilon, rdp_to_dp, times_up
from fedhh.privacy.solver import EPS_LOCAL_MAX, solve_allocation, solve_local_epsilon
from fedhh.privacy.subsampling import subsampled_rdp

VERSION = 2
# The fields ``to_dict`` writes, and those of each of its spends: a stored ledger with others
# is not one this fedhh wrote (a later fedhh's, or damage), and is refused, not read in part.
FIELDS = ("version", "eps_agg", "delta", "rounds", "n_min", "population", "sampling_rate",
          "eps_local", "method", "per_round_delta", "slack_delta", "orders", "offsets", "items",
          "spends")
SPEND_FIELDS = ("round_index", "contributors", "attempt", "rdp", "epsilon")


@dataclass(frozen=True)
class RoundSpend:
    """One charge: a round attempt that reached unmasking, with its contributor count."""

    round_index: int
    contributors: int
    rdp: tuple[float, ...]  # shuffle methods: per-round RDP on the ledger's orders; () for "sum"
    epsilon: float  # shuffle methods: per-round eps at per_round_delta; inf when unused ("sum")
    attempt: int | None = None  # attempt number when given (retries must increase it)


@dataclass(frozen=True)
class SpendCheck:
    """Dry-run result of recording a charge."""

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


def shown_above(value: float, target: float) -> str:
    """``value`` to 6 significant digits, or all of them where it is above ``target`` and those
    6 would not read so (a projection refused for exceeding 0.4346634087730611 by 2e-10 read
    "0.434663 > 0.4346634087730611")."""
    short = f"{value:.6g}"
    return short if float(short) > target or not value > target else repr(value)


def _int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise PrivacyError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if int(value) < minimum:
        raise PrivacyError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class PrivacyLedger:
    """Declared budget of a run and its charges so far (0-based round indices)."""

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
    population: int | None = None  # N of a Poisson-sampled run (None when q = 1)
    offsets: tuple[float, ...] = ()  # per-round allocation ("sum" only): eps_local + offset
    items: tuple[int, ...] = ()  # items per report of each round ("sum" only; () : one each)

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        eps_agg: float,
        delta: float,
        rounds: int,
        n_min: int,
        sampling_rate: float = 1.0,
        method: str = methods.DEFAULT_METHOD,
        eps_local: float | None = None,
        population: int | None = None,
        cap: float = EPS_LOCAL_MAX,
    ) -> PrivacyLedger:
        """Declare a run; solve eps_local for n_min contributors unless it is given.

        ``population``: the N devices a Poisson-sampled run (q < 1) samples from, when known
        (default ceil(n_min / q)); a round's participants are charged as a sample of them.
        ``cap``: the largest eps_local solved for (``solver.solve_local_epsilon``)."""
        return cls._open(eps_agg, delta, rounds, n_min, sampling_rate, method, eps_local, None,
                         population=population, cap=cap)

    @classmethod
    def open_allocated(
        cls,
        eps_agg: float,
        delta: float,
        offsets: Sequence[float],
        n_min: int,
        sampling_rate: float = 1.0,
        method: str = methods.DEFAULT_METHOD,
        eps_local: float | None = None,
        items: Sequence[int] = (),
        population: int | None = None,
        cap: float = EPS_LOCAL_MAX,
    ) -> PrivacyLedger:
        """``open`` for a per-round allocation (method "sum"), one round per offset: round i is
        charged, and must be run, at local epsilon eps_local + offsets[i] (``round_epsilon``).
        ``items``: how many elements a device reports in each round (default one); a round of
        k is charged as k compositions of the one-hot round (``accountant.repeat_offsets``)."""
        return cls._open(eps_agg, delta, len(offsets), n_min, sampling_rate, method, eps_local,
                         offsets, tuple(items), population, cap)

    @classmethod
    def _open(cls, eps_agg: float, delta: float, rounds: int, n_min: int, sampling_rate: float,
              method: str, eps_local: float | None, offsets: Sequence[float] | None,
              items: tuple[int, ...] = (), population: int | None = None,
              cap: float = EPS_LOCAL_MAX) -> PrivacyLedger:
        eps_agg = check_eps(eps_agg, "eps_agg")
        delta = check_delta(delta)
        rounds = check_rounds(rounds)
        n_min = check_devices(n_min, "n_min")
        sampling_rate = check_rate(sampling_rate)
        method = methods.check_method(method)
        if population is not None and sampling_rate < 1.0:
            # (derived from n_min = round(q N) it could come out above N: 1,387 devices at
            # q = 0.5 gave n_min 694 and a population of 1,388, and each round's sampling
            # probability m / N was charged below the real m / 1,387)
            population = check_devices(population, "population")
            _check_population(population, n_min)
        elif population is not None and population != n_min:
            raise PrivacyError(f"population {population} of a run without sampling must be "
                               f"n_min ({n_min}), or not given")
        else:
            population = n_min if sampling_rate == 1.0 else math.ceil(n_min / sampling_rate)
        allocation = tuple(float(o) for o in offsets) if offsets is not None else ()
        items = _check_items(items, allocation, method)
        if eps_local is None and allocation:
            charged = repeat_offsets(allocation, items) if items else allocation
            eps_local = solve_allocation(eps_agg, delta, charged, population, sampling_rate,
                                         method, cap).eps_local
        elif eps_local is None:
            eps_local = solve_local_epsilon(
                eps_agg, delta, rounds, population, sampling_rate, method, cap
            ).eps_local
        eps_local = check_eps(eps_local, "eps_local")
        check_offsets(eps_local, allocation or None, rounds, method)
        per_round_delta = slack = math.nan
        if method != "sum":
            plan = aggregate_epsilon(eps_local, delta, rounds, population, sampling_rate, method)
            per_round_delta, slack = plan.per_round_delta, plan.slack_delta
        expected = participants_for(population, sampling_rate, method)
        ledger = cls(
            eps_agg=eps_agg,
            delta=delta,
            rounds=rounds,
            n_min=expected,
            sampling_rate=sampling_rate,
            eps_local=eps_local,
            method=method,
            per_round_delta=per_round_delta,
            slack_delta=slack,
            population=population if expected < population else None,
            offsets=allocation,
            items=items,
        )
        planned = ledger.projected_epsilon()
        if planned > eps_agg:
            raise PrivacyError(
                f"plan exceeds the budget: eps_local={eps_local} over {rounds} rounds with "
                f"n_min={ledger.n_min} gives eps_agg={shown_above(planned, eps_agg)} > {eps_agg} "
                f"(delta={delta})"
            )
        return ledger

    # ---- per-charge curves -----------------------------------------------------------------
    def round_epsilon(self, round_index: int) -> float:
        """The local epsilon round ``round_index`` (0-based) runs and is charged at."""
        return self.eps_local + (self.offsets[round_index] if self.offsets else 0.0)

    def _curve(self, contributors: int) -> RoundSpend:
        """The spend of a round with ``contributors`` reports (round index filled in later)."""
        if self.method == "sum":
            return RoundSpend(-1, contributors, (), math.inf)
        grid = np.asarray(self.orders, dtype=float)
        sampled = self.population is not None
        # Shuffling more reports is a post-processing of shuffling fewer; with sampling the
        # mixture weight m/N grows with m, so only the real count is used.
        counts = [contributors] if sampled or contributors < self.n_min else [
            contributors, self.n_min]
        rdp = np.full(grid.shape, math.inf)
        eps = math.inf
        for n in counts:
            given_m: dict[str, int] = {}
            shuffled = n
            if self.population is not None and self.method == "clones":
                given_m, shuffled = {"participants": n}, self.population
            if shuffle.has_rdp(self.method):
                curve = shuffle.round_rdp(self.eps_local, shuffled, self.method, grid, **given_m)
                if sampled and self.method == "paper":
                    curve = subsampled_rdp(grid, curve, self.sampling_rate)
                rdp = np.minimum(rdp, curve)
            if math.isfinite(self.per_round_delta):
                eps = min(eps, shuffle.round_epsilon(
                    self.eps_local, shuffled, self.method, self.per_round_delta, **given_m))
        eps = min(eps, self.eps_local)  # a round is always eps_local-DP (post-processing)
        return RoundSpend(-1, contributors, tuple(float(x) for x in rdp), eps)

    def _report_spend(self, round_index: int) -> RoundSpend:
        """The charge of a round whose report was released by several attempts: the report
        alone (module docstring). For the shuffle methods its Renyi divergences are exact:
        D_a(P||Q) = log(sum_o P(o)^a Q(o)^(1-a)) / (a - 1) (Mironov 2017, Definition 3) over
        the four outcomes of the pair Bern(a1) x Bern(a0) against Bern(a0) x Bern(a1) at the two
        coordinates a change of element moves (the sum factorises over the two coins), and its
        epsilon is the report's eps_local (pure DP)."""
        eps = self.round_epsilon(round_index)
        if self.method == "sum":
            return RoundSpend(round_index, sum_pld.REPORT, (), math.inf)
        r = sum_pld.rates(eps)
        a = np.asarray(self.orders, dtype=float)
        l1, m1 = math.log(r.a1), math.log1p(-r.a1)
        l0, m0 = math.log(r.a0), math.log1p(-r.a0)
        first = np.logaddexp(a * l1 + (1 - a) * l0, a * m1 + (1 - a) * m0)
        second = np.logaddexp(a * l0 + (1 - a) * l1, a * m0 + (1 - a) * m1)
        rdp = (first + second) / (a - 1)
        return RoundSpend(round_index, sum_pld.REPORT, tuple(float(x) for x in rdp),
                          r.effective_epsilon)

    def _charged(self, spends: list[RoundSpend]) -> list[RoundSpend]:
        """What composes: each round's one charge, or for a round charged more than once its
        report alone, in place of its charges (module docstring)."""
        times: dict[int, int] = {}
        for s in spends:
            times[s.round_index] = times.get(s.round_index, 0) + 1
        return [s for s in spends if times[s.round_index] == 1] + [
            self._report_spend(i) for i, k in sorted(times.items()) if k > 1]

    def _compose(self, spends: list[RoundSpend]) -> float:
        if not spends:
            return 0.0
        spends = self._charged(spends)
        if self.method == "sum":
            # A round of k items is k compositions of the one-hot round (repeat_offsets).
            charged = [s for s in spends
                       for _ in range(self.items[s.round_index] if self.items else 1)]
            return sum_pld.sum_epsilon(
                [self.round_epsilon(s.round_index) for s in charged], self.delta,
                [s.contributors for s in charged], self.population
            )
        grid = np.asarray(self.orders, dtype=float)
        best = times_up(len(spends), self.eps_local)  # (Theorem 3.16, rounded up)
        if all(len(s.rdp) == len(grid) for s in spends):
            total = np.sum([np.asarray(s.rdp) for s in spends], axis=0)
            if np.any(np.isfinite(total)):
                best = min(best, rdp_to_dp(grid, total, self.delta).epsilon)
        k = len(spends)
        worst = max(s.epsilon for s in spends)
        if math.isfinite(worst) and math.isfinite(self.per_round_delta):
            best = min(best, kov_epsilon(worst, k, self.slack_delta if k > 1 else 0.0))
        return best

    # ---- queries ---------------------------------------------------------------------------
    @property
    def rounds_recorded(self) -> int:
        """Distinct rounds charged (a retried round counts once)."""
        return len({s.round_index for s in self.spends})

    @property
    def charges(self) -> int:
        """Charges recorded, retries included."""
        return len(self.spends)

    def spent_epsilon(self) -> float:
        """Aggregate epsilon (at this ledger's delta) of every charge so far."""
        return self._compose(list(self.spends))

    def projected_epsilon(self, extra: RoundSpend | None = None) -> float:
        """Every charge (+ ``extra``) plus the rounds not yet charged at n_min, composed."""
        spends = list(self.spends) + ([extra] if extra is not None else [])
        charged = {s.round_index for s in spends}
        planned = self._curve(self.n_min)
        spends += [replace(planned, round_index=i) for i in range(self.rounds)
                   if i not in charged]
        return self._compose(spends)

    def check(self, round_index: int, contributors: int, *, attempt: int | None = None,
              shown_round: int | None = None) -> SpendCheck:
        """Dry run of ``record``: whether the charge would be accepted, and the figures.
        ``shown_round``: the round's number in the caller's words (a run's rounds count from
        1), for the reason; by default its index here, from 0. Before, the round driver's
        refusal read "refused round 1 before it opened: round 0 (attempt 2, ...)"."""
        target = self.eps_agg
        round_index = _int(round_index, "round_index", -(2**62))
        shown = round_index if shown_round is None else shown_round
        contributors = _int(contributors, "contributors", 1)
        if attempt is not None:
            attempt = _int(attempt, "attempt", 0)

        def refuse(reason: str, projected: float = math.nan) -> SpendCheck:
            return SpendCheck(False, reason, round_index, contributors, projected, target, None)

        if not 0 <= round_index < self.rounds:
            return refuse(
                f"round {round_index} is outside the declared rounds 0..{self.rounds - 1}"
            )
        earlier = [s.attempt for s in self.spends if s.round_index == round_index]
        if earlier:
            if attempt is None:
                return refuse(f"round {shown} was already recorded (a retried attempt "
                              "must give its attempt number)")
            if any(a is None or a >= attempt for a in earlier):
                last = "an unnumbered attempt" if None in earlier else (
                    f"attempt {max(a for a in earlier if a is not None)}")
                return refuse(f"round {shown} was already charged for {last}; "
                              f"attempt {attempt} must be larger")
        if contributors < 2:
            return refuse(f"round {shown} has {contributors} contributor(s): "
                          "no aggregation")
        if self.population is not None and contributors > self.population:
            return refuse(f"round {shown} has {contributors} participants, more than "
                          f"the {self.population} devices of the sampled population")
        spend = replace(self._curve(contributors), round_index=round_index, attempt=attempt)
        projected = self.projected_epsilon(spend)
        if projected > target:
            retry = (f" (attempt {attempt}, a retry: its report, sent again, is charged as "
                     "released alone)") if earlier else ""
            reason = (f"round {shown}{retry} with {contributors} contributors "
                      f"(n_min={self.n_min}) would bring the projected eps_agg to "
                      f"{shown_above(projected, target)} > budget {target} (delta={self.delta}, "
                      f"eps_local={self.eps_local:.6g}, {len(self.spends)} charge(s) so far)")
            # The spend goes with the refusal: a charge that is a fact (an attempt that reached
            # unmasking) is recorded anyway (``record(..., force=True)``).
            return SpendCheck(False, reason, round_index, contributors, projected, target,
                              spend)
        return SpendCheck(True, "ok", round_index, contributors, projected, target, spend)

    def record(self, round_index: int, contributors: int, *, attempt: int | None = None,
               force: bool = False, shown_round: int | None = None) -> PrivacyLedger:
        """A new ledger with the charge recorded; PrivacyError if it would not fit.

        ``force``: record it even if it takes the projection over the budget (what already
        happened must be on the books: an attempt that reached unmasking); a malformed charge
        (round out of range, a repeated attempt, too few contributors) is refused still."""
        result = self.check(round_index, contributors, attempt=attempt, shown_round=shown_round)
        if result.spend is None or not (result.accepted or force):
            raise PrivacyError(f"privacy budget refused: {result.reason}")
        return replace(self, spends=(*self.spends, result.spend))

    @property
    def overspent(self) -> bool:
        """True if the recorded charges alone exceed the budget (only forced charges can)."""
        return self.spent_epsilon() > self.eps_agg

    # ---- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (non-finite numbers become None)."""
        return {
            "version": VERSION,
            "eps_agg": self.eps_agg,
            "delta": self.delta,
            "rounds": self.rounds,
            "n_min": self.n_min,
            "population": self.population,
            "sampling_rate": self.sampling_rate,
            "eps_local": self.eps_local,
            "method": self.method,
            "per_round_delta": _enc(self.per_round_delta),
            "slack_delta": _enc(self.slack_delta),
            "orders": list(self.orders),
            "offsets": list(self.offsets),
            "items": list(self.items),
            "spends": [
                {
                    "round_index": s.round_index,
                    "contributors": s.contributors,
                    "attempt": s.attempt,
                    "rdp": [_enc(x) for x in s.rdp],
                    "epsilon": _enc(s.epsilon),
                }
                for s in self.spends
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyLedger:
        """Inverse of ``to_dict``; also reads version-1 dicts. Validates the figures."""
        if not isinstance(data, dict):
            raise PrivacyError(f"malformed ledger: expected a JSON object, got {type(data)}")
        version = data.get("version", 1)
        if version not in (1, VERSION):
            raise PrivacyError(
                f"ledger version {version!r} is not readable by this version of fedhh "
                f"(reads 1 and {VERSION})"
            )
        _check_fields(data, FIELDS, "")
        try:
            method = methods.check_method(data["method"])
            rate = check_rate(data["sampling_rate"])
            n_min = check_devices(data["n_min"], "n_min")
            if version == 1:
                population = None if rate == 1.0 else math.ceil(n_min / rate)
            else:
                raw = data["population"]
                population = None if raw is None else check_devices(raw, "population")
                if population is not None:
                    _check_population(population, n_min)
            per_round = data["per_round_delta"]
            slack = data["slack_delta"]
            spends = []
            for s in data["spends"]:
                _check_fields(s, SPEND_FIELDS, "a spend's ")
                attempt = s.get("attempt") if version > 1 else None
                eps = s["epsilon"]
                spends.append(RoundSpend(
                    _int(s["round_index"], "round_index", 0),
                    _int(s["contributors"], "contributors", 1),
                    tuple(_dec(x) for x in s["rdp"]),
                    _dec(eps),
                    None if attempt is None else _int(attempt, "attempt", 0),
                ))
            offsets = tuple(float(o) for o in data.get("offsets", ()))
            rounds = check_rounds(data["rounds"])
            for index, spend in enumerate(spends):
                if spend.round_index >= rounds:
                    # (an allocated ledger's composition raised IndexError; one without
                    # offsets composed it as a charge of a round the run does not have)
                    raise PrivacyError(f"spend {index} is of round {spend.round_index}, outside "
                                       f"the declared rounds 0..{rounds - 1}")
            eps_local = check_eps(data["eps_local"], "eps_local")
            check_offsets(eps_local, offsets or None, rounds, method)
            items = _check_items(tuple(data.get("items", ())), offsets, method)
            return cls(
                eps_agg=check_eps(data["eps_agg"], "eps_agg"),
                delta=check_delta(data["delta"]),
                rounds=rounds,
                n_min=n_min,
                sampling_rate=rate,
                eps_local=eps_local,
                method=method,
                per_round_delta=math.nan if per_round is None else float(per_round),
                slack_delta=math.nan if slack is None else float(slack),
                orders=tuple(float(a) for a in data["orders"]),
                spends=tuple(spends),
                population=population,
                offsets=offsets,
                items=items,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            if isinstance(error, PrivacyError):
                raise PrivacyError(f"malformed ledger: {error}") from error
            raise PrivacyError(f"malformed ledger: {error!r}") from error


def _check_fields(data: Any, known: tuple[str, ...], whose: str) -> None:
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise PrivacyError(f"malformed ledger: {whose}fields "
                               f"{', '.join(map(shown, unknown))} are unknown")


def _check_items(items: tuple[int, ...], offsets: tuple[float, ...], method: str
                 ) -> tuple[int, ...]:
    """Items per report of each round: () (one each), or one integer >= 1 per allocated round,
    accounted by the sum method only (``accountant.repeat_offsets``)."""
    if not items:
        return ()
    if method != "sum":
        raise PrivacyError(f"several items per report are accounted by the sum method only, "
                           f"not {method!r}")
    repeat_offsets(offsets, items)  # checks the length and the counts
    return tuple(int(k) for k in items)


def _check_population(population: int, n_min: int) -> None:
    """A sampled run's population holds at least n_min devices: no round drawn from fewer can
    reach n_min contributors (before, a population of 50 under an n_min of 100 was planned and
    charged at round(q 50) participants, a figure the run could never release)."""
    if population < n_min:
        raise PrivacyError(f"population {population} is below n_min ({n_min}): no round sampled "
                           f"from {population} devices can reach {n_min} contributors")
