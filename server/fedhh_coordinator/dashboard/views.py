"""Everything a dashboard page shows, gathered from the coordinator's state without changing
it: the store (runs, attempts, ledgers, tree states), the read-only reader (timestamps, the
fleet, lifetime charges), the runner's live progress and the check-in lobby."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import NamedTuple

from fedhh.config import Mode, RunConfig
from fedhh.errors import NotFoundError, StoreDamaged
from fedhh.server.causes import (
    completion_budget_note,
    lost_in_completion_note,
    ran_out_cause,
)
from fedhh.server.segment import trim_note
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard.reader import (
    DeviceCharge,
    Enrolled,
    FleetCounts,
    Reader,
    RunTimes,
)
from fedhh_coordinator.dashboard.results import (
    Hit,
    RunSpend,
    SpendCache,
    cut_prefixes,
    heavy_hitters,
)
from fedhh_coordinator.dashboard.timeline import (
    STAGE_LABELS,
    AttemptView,
    Dropout,
    attempt_view,
    dropout_by_stage,
)
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.progress import Progress
from fedhh_coordinator.runner import CANCEL_ASKED, Runner
from fedhh_coordinator.runs import (
    FixedRuns,
    RunFixed,
    RunParts,
    ShownDenyLists,
    stored_config,
    stored_ledger,
)
from fedhh_coordinator.slow_reads import off_loop, shared
from fedhh_coordinator.store import RoundRow, RunHead, Store

FINAL = ("done", "failed", "cancelled")
RECENT_RUNS = 5  # the fleet page's dropout covers the attempts of this many latest runs
RECENT_ATTEMPTS = 20
TOP_DEVICES = 25
# The runs whose planner answers (Views.ask_planner) are kept, the latest viewed: a few hundred
# bytes each, as many runs as the spend cache keeps ledgers (results.SpendCache).
PLANNED_RUNS = 128
# A device within a billionth of its lifetime budget shows as exhausted: the sums shown are SQL's
# (rounded); admission compares exact sums (budgets.py)
FULL_SLACK = 1e-9


@dataclass(frozen=True)
class RunLine:
    """One run as the runs page lists it."""

    run_id: str
    state: str
    released: int
    rounds: int
    now: str  # the attempt in progress, in words ("" unless running)
    eps_spent: float
    eps_agg: float
    delta: float
    started: float
    seconds: float
    error: str
    emptied: int = 0  # the last released round, if it kept no prefix (0: it kept some)

    @property
    def shown_state(self) -> str:
        """The state as the pages show it: a running run whose cancel waits for the round
        under way is "cancelling" (the store keeps it "running", with ``CANCEL_ASKED`` as its
        error, so that a restarted coordinator still cancels it)."""
        return "cancelling" if self.state == "running" and self.error == CANCEL_ASKED \
            else self.state

    @property
    def failure(self) -> bool:
        """Whether ``error`` says what went wrong (a failed or damaged run), rather than
        why an operator's cancel stopped, or is stopping, the run (a cancelled run's damage
        is still a failure)."""
        cancel = self.shown_state == "cancelling" or (
            self.state == "cancelled" and self.error.startswith("cancelled by the operator"))
        return bool(self.error) and not cancel


@dataclass(frozen=True)
class RunDetail:
    line: RunLine
    config: RunConfig
    eps_local: float
    attempts: tuple[AttemptView, ...]
    spend: RunSpend
    hits: tuple[Hit, ...]
    cut: tuple[Hit, ...]  # heavy prefixes the completion rounds could not complete
    deny: tuple[str, ...]
    # What the released rounds' ``trimmed`` prefixes mean and what to change
    # (``fedhh.server.segment.trim_note``, as ``fedhh admin status`` says it); "" if none.
    trim_note: str = ""
    # Many prefixes lost in the completion rounds, and what to change (``_completion_note``,
    # as `fedhh up` prints it and `fedhh admin results` gives it); "" if few were.
    completion_note: str = ""


class RunRead(NamedTuple):
    """A run as ``Views.run`` reads it from the store (``Views._read``): the changing part
    of its row, its fixed part (``RunFixed``), its parts, its rounds."""
    row: RunHead
    fixed: RunFixed
    parts: RunParts
    rounds: list[RoundRow]


class FleetRead(NamedTuple):
    """What ``Views.fleet`` reads from the store and the reader (``Views._fleet_read``): the
    latest runs' rows, each with its n_min, rounds and finished attempts (``_settled``),
    newest first."""
    runs: tuple[tuple[RunHead, int, list[RoundRow], list[AttemptView | None]], ...]
    counts: FleetCounts
    enrollments: tuple[Enrolled, ...]


@dataclass(frozen=True)
class BudgetView:
    eps: float
    delta: float
    period_days: float
    enrolled: int
    charged: int  # devices with a charge in the period
    exhausted: int  # devices whose charges leave room for no more epsilon
    # devices by share of the budget used (the larger of eps and delta): <25, <50, <75, <100 %
    # and all of it
    shares: tuple[int, ...]
    top: tuple[DeviceCharge, ...]


@dataclass(frozen=True)
class FleetView:
    counts: FleetCounts
    checked_in: int  # in the open check-in's pool, or the cohort of the round under way
    activity: str  # what the running run is doing ("idle" when none runs)
    attempts: tuple[AttemptView, ...]  # newest first
    dropout: tuple[Dropout, ...]
    enrollments: tuple[Enrolled, ...]


def progress_text(progress: Progress | None, pool: int) -> str:
    if progress is None or not progress.phase:
        return ""
    where = f"round {progress.round}.{progress.attempt}"
    if progress.phase == "check-in":
        return f"{where}: check-in, {pool} device{'' if pool == 1 else 's'} so far"
    if progress.phase == "secure aggregation":
        stage = STAGE_LABELS.get(progress.stage, progress.stage.lower().replace("_", " "))
        return f"{where}: secure aggregation with {progress.devices} devices" + (
            f", {stage}" if stage else "")
    if progress.phase == "releasing":
        return f"{where}: releasing the sum of {progress.devices} contributors"
    return f"{where}: {progress.phase}"


def _trim_note(rounds: list[RoundRow], config: RunConfig) -> str:
    """``trim_note`` over the released rounds' stored reports (``RoundReport``: each holds its
    ``trimmed``, the ``continuing`` prefixes the next round queries and its
    ``next_segment_bits``); "" when no round left a kept prefix out."""
    reports = [{**r.summary, "round": r.round} for r in rounds if r.state == "released"]
    if not any(report.get("trimmed") for report in reports):
        return ""
    return trim_note(reports, config.resolved_dim_limit(Mode.NETWORK)) or ""


def _budget_words(config: RunConfig, eps_local: float, planner: bool) -> tuple[str, str]:
    """``ran_out_cause`` of the run, and the ``completion_budget_note`` shown where a row's
    cause is those words ("" where they are not the budget's); ``planner`` as there. A row's
    budget cause can only be these words (``cut_cause``), so this is the note of any list."""
    ran_out = ran_out_cause(config, eps_local, planner=planner)
    return ran_out, completion_budget_note(config, eps_local, [ran_out], planner=planner) or ""


def _completion_note(rounds: list[RoundRow], parts: RunParts, hits: tuple[Hit, ...],
                     cut: tuple[Hit, ...], ran_out: str, budget: str) -> str:
    """``lost_in_completion_note`` of the run: its cut prefixes' causes against its heavy
    hitters, its main rounds and completion weight, its released rounds' thresholds (their
    stored reports'), then ``budget`` (``_budget_words``) when a row's cause is ``ran_out``;
    "" when neither says anything."""
    config = parts.config
    thresholds = {r.round: r.summary.get("threshold") for r in rounds if r.state == "released"}
    lost = lost_in_completion_note([h.cause for h in cut], [(h.round, h.truncated) for h in hits],
                                   config.rounds, config.completion_weight, thresholds)
    shown = budget if any(h.cause == ran_out for h in (*hits, *cut)) else ""
    return " ".join(filter(None, (lost, shown)))


# The states of an attempt the runner may be in: drawn with its progress, on the event loop
LIVE = ("open", "releasing")


def _settled(n_min: int, now: float, rounds: list[RoundRow]) -> list[AttemptView | None]:
    """The attempt of each of ``rounds`` the runner cannot be in (not ``LIVE``), drawn
    without its progress (in a thread: a run's attempts are one a round and more); None for
    the others, which ``Views._attempts`` draws on the loop."""
    return [None if r.state in LIVE else attempt_view(r, n_min, None, 0, now) for r in rounds]


class Views:
    def __init__(self, store: Store, runner: Runner, lobby: Lobby, budget: LifetimeBudget,
                 reader: Reader, deny: ShownDenyLists | None = None,
                 fixed: FixedRuns | None = None) -> None:
        """``deny``: the deny lists displayed, shared with the admin service's GetResults;
        ``fixed``: the runs' fixed parts kept, shared with its GetRun."""
        self.store, self.runner, self.lobby = store, runner, lobby
        self.budget, self.reader = budget, reader
        self.spend = SpendCache()
        # run id -> ``_budget_words`` with the planner (``ask_planner``): a run's config and
        # eps_local are fixed when it is created, so its answer never changes. The runs viewed
        # latest (one entry each, and runs are made without end over a coordinator's life).
        self._planned: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.planned_size = PLANNED_RUNS
        # run id -> its solve under way: the requests that come meanwhile await that one
        self._solving: dict[str, asyncio.Future[tuple[str, str] | None]] = {}
        # the runs' fixed parts kept (``FixedRuns``)
        self.fixed = FixedRuns() if fixed is None else fixed
        # the deny lists displayed (``show_deny``)
        self.deny = ShownDenyLists() if deny is None else deny

    # ---- runs ------------------------------------------------------------------------------
    def _line(self, row: RunHead, now: float, times: RunTimes | None,
              rounds: list[RoundRow], doing: str) -> RunLine:
        """``doing``: ``progress_text`` of the run, read on the event loop (``_doing``)."""
        started = times.created_at if times else now
        stopped = times.updated_at if times and row.state in FINAL else now
        spend = self.spend(row)
        released = [r for r in rounds if r.state == "released"]
        last = max(released, key=lambda r: r.round, default=None)
        return RunLine(
            run_id=row.run_id, state=row.state,
            released=len(released),
            rounds=spend.rounds, now=doing,
            eps_spent=spend.spent, eps_agg=spend.eps_agg, delta=spend.delta, started=started,
            seconds=max(0.0, stopped - started), error=row.error,
            emptied=last.round if last is not None and not last.summary.get("kept") else 0)

    def _doing(self, run_id: str) -> str:
        """What the run is doing now, in words: the runner's progress, read on the event loop
        that changes it."""
        return progress_text(self.runner.progress.get(run_id), self.lobby.cohort_size)

    async def runs(self) -> list[RunLine]:
        """Every run, newest first, read in a thread (``_run_lines``); what each is doing
        read here, on the loop."""
        lines = await off_loop(self._run_lines, time.time())
        return [replace(line, now=self._doing(line.run_id)) if read else line
                for line, read in lines]

    def _run_lines(self, now: float) -> list[tuple[RunLine, bool]]:
        """Each run's line, newest first, with whether its row read (a damaged one is listed
        by its id and state, with the damage): the changing part of its row (``RunHead``: not
        its config and deny list, whose decoding, ~3 s with 1,000,000 items, each render of
        the live page, once a second, did for every run) and its rounds, its ledger
        composed."""
        times = self.reader.run_times()
        lines = []
        for run_id, state in reversed(self.store.run_states()):
            try:
                lines.append((self._line(self.store.run_head(run_id), now, times.get(run_id),
                                         self.store.rounds(run_id), ""), True))
            except StoreDamaged as damage:
                started = times[run_id].created_at if run_id in times else now
                lines.append((RunLine(run_id, state, 0, 0, "", 0.0, 0.0, 0.0, started, 0.0,
                                      str(damage)), False))
        return lines

    async def ask_planner(self, run_id: str) -> None:
        """Ask the coordinator's planner, once per run, whether it alone refuses the run's next
        completion round, so that ``run`` gives a cut prefix's cause and the budget note as
        `fedhh admin results` does (before, "no rounds left" at eps_agg 2.7705 to 2.7735 at
        n_min 100). One solve takes up to 1.7 s: a thread's, not the event loop's, where the
        devices' calls are served, and one a run however many requests come while it runs
        (each started its own before). A request that goes away leaves the solve to the others
        (shielded). A run not found or damaged is left to ``run`` to say."""
        if self._planned_words(run_id) is not None:
            return
        # (a solve that fails after every request left has its error retrieved: before, it
        # was logged as "exception was never retrieved")
        words = await shared(self._solving, run_id, self._solve_planner, run_id)
        if words is None:
            return
        self._planned[run_id] = words
        self._planned.move_to_end(run_id)
        while len(self._planned) > self.planned_size:
            self._planned.popitem(last=False)

    def _solve_planner(self, run_id: str) -> tuple[str, str] | None:
        try:
            row = self.store.run(run_id)
            config, eps_local = stored_config(row), stored_ledger(row).eps_local
        except (NotFoundError, StoreDamaged):
            return None
        return _budget_words(config, eps_local, True)

    async def show_deny(self, run_id: str) -> tuple[str, ...] | None:
        """Display the run's deny list for ``run``, once, in a thread (``ShownDenyLists.show``),
        and return it. ``display_item`` decodes each code (~0.2 ms with the unicode codebook)
        and the live page asks ``run`` every second: a list of 170,000 items held the
        coordinator's event loop ~35 s each time, no device or caller answered. A run's codes
        and codec never change, so the live page keeps what this returns and gives it to
        ``run`` (only the last runs shown stay in ``deny``, ``DENY_SHOWN_RUNS``, which
        GetResults shares). A run not found or damaged (None) is left to ``run`` to say."""
        try:
            return await self.deny.show(run_id, await self.fixed.get(self.store, run_id))
        except (NotFoundError, StoreDamaged):
            return None

    def _planned_words(self, run_id: str) -> tuple[str, str] | None:
        """The planner's answer for ``run_id`` if it is kept (now the latest used)."""
        words = self._planned.get(run_id)
        if words is not None:
            self._planned.move_to_end(run_id)
        return words

    def _read(self, run_id: str, fixed: RunFixed) -> RunRead:
        """The run with ``fixed`` (``FixedRuns.get``) and the changing part of its row
        (``FixedRuns.current``: ``fixed`` loaded again where the row is another run's)."""
        row, fixed = self.fixed.current(self.store, run_id, fixed)
        return RunRead(row, fixed, fixed.parts(row), self.store.rounds(run_id))

    async def run(self, run_id: str, deny: tuple[str, ...] | None = None) -> RunDetail:
        """One run (NotFoundError if there is none of that id, StoreDamaged if its row is),
        read and built in a thread (``_built``): the changing part of its row read
        (``RunHead``) and its parts built with its fixed part kept (``FixedRuns``), its
        heavy hitters and cut prefixes found, its ledger composed and its finished attempts
        drawn. Before, each page, download and live render (once a second) of the run read
        its row whole and built its parts (``RunParts.load``: ~3 s with 1,000,000 deny-list
        items): 32 live pages of such a run held every slow reads' thread, and GetRun and
        GetResults waited behind them. Its budget words the
        planner's where ``ask_planner`` has answered, else the test alone (``ran_out_cause``);
        its deny list ``deny`` where given (``show_deny``'s), else as ``show_deny`` keeps it,
        else displayed there and kept (``ShownDenyLists.shown``). What the runner is doing is
        read here, on the loop that changes it, as are the attempts it may be in."""
        now = time.time()
        fixed = await self.fixed.get(self.store, run_id)
        detail, rounds, settled = await off_loop(self._built, run_id, fixed, deny,
                                                 self._planned_words(run_id), now)
        return replace(detail, line=replace(detail.line, now=self._doing(run_id)),
                       attempts=tuple(self._attempts(run_id, detail.config.min_devices, now,
                                                     rounds, settled)))

    def _built(self, run_id: str, fixed: RunFixed, deny: tuple[str, ...] | None,
               planned: tuple[str, str] | None, now: float
               ) -> tuple[RunDetail, list[RoundRow], list[AttemptView | None]]:
        """The run as ``run`` shows it but for what the runner is doing (its line's ``now``
        "", no attempts), its rounds and their attempts drawn where finished (``_settled``).
        It reads only its arguments, the store, the reader and the thread-safe caches: it runs
        in a thread."""
        row, read, parts, rounds = self._read(run_id, fixed)
        ran_out, budget = planned or _budget_words(parts.config, parts.ledger.eps_local, False)
        hits = tuple(heavy_hitters(parts, rounds, ran_out))
        if deny is None or read is not fixed:  # (``fixed`` another run's of the id)
            deny = self.deny.shown(run_id, read)
        cut = tuple(cut_prefixes(parts, rounds, ran_out))
        detail = RunDetail(
            line=self._line(row, now, RunTimes(row.created_at, row.updated_at), rounds, ""),
            config=parts.config, eps_local=row.eps_local, attempts=(),
            spend=self.spend(row), hits=hits, cut=cut,
            deny=deny,
            trim_note=_trim_note(rounds, parts.config),
            completion_note=_completion_note(rounds, parts, hits, cut, ran_out, budget))
        return detail, rounds, _settled(parts.config.min_devices, now, rounds)

    def _attempts(self, run_id: str, n_min: int, now: float, rounds: list[RoundRow],
                  settled: list[AttemptView | None]) -> list[AttemptView]:
        """Each attempt of ``rounds``: ``settled``'s (``_settled``, drawn in a thread) where
        it holds one, else drawn here, with the runner's progress if it is that attempt."""
        progress = self.runner.progress.get(run_id)
        views = []
        for r, view in zip(rounds, settled, strict=True):
            if view is None:
                live = progress if progress is not None and (progress.round, progress.attempt) \
                    == (r.round, r.attempt) else None
                view = attempt_view(r, n_min, live, self.lobby.cohort_size, now)
            views.append(view)
        return views

    # ---- budgets ---------------------------------------------------------------------------
    async def budgets(self) -> BudgetView:
        """The devices' charges in the budget period, read in a thread: a query over every
        device's charges, which the event loop would otherwise wait for."""
        return await off_loop(self._budgets)

    def _budgets(self) -> BudgetView:
        b = self.budget
        charges = self.reader.device_charges(time.time() - b.period_s)
        shares = [0] * 5
        exhausted = 0
        for c in charges:
            used = max(c.eps / b.eps, c.delta / b.delta)
            full = used >= 1 - FULL_SLACK
            shares[4 if full else min(3, int(used * 4))] += 1
            exhausted += full
        return BudgetView(b.eps, b.delta, b.period_s / 86400, self.reader.fleet().devices,
                          len(charges), exhausted, tuple(shares), tuple(charges[:TOP_DEVICES]))

    # ---- fleet -----------------------------------------------------------------------------
    async def fleet(self) -> FleetView:
        """The fleet and the latest runs' attempts, read in a thread (``FleetRead``); the
        runner's progress and the lobby's pool read here, on the loop that changes them."""
        now = time.time()
        read = await off_loop(self._fleet_read, now)
        attempts: list[AttemptView] = []
        for row, n_min, rounds, settled in read.runs:
            attempts += self._attempts(row.run_id, n_min, now, rounds, settled)
        attempts.sort(key=lambda a: a.started_at, reverse=True)
        attempts = attempts[:RECENT_ATTEMPTS]
        running = next((row for row, *_ in read.runs if row.run_id in self.runner.progress),
                       None)
        activity = "idle"
        if running is not None:
            text = self._doing(running.run_id)
            activity = f"{running.run_id}, {text}" if text else running.run_id
            if running.state == "running" and running.error == CANCEL_ASKED:
                activity += " (cancelling: the run stops once this round ends)"
        return FleetView(read.counts, self.lobby.cohort_size, activity,
                         tuple(attempts), tuple(dropout_by_stage(attempts)), read.enrollments)

    def _fleet_read(self, now: float) -> FleetRead:
        runs = []
        for run_id, _ in reversed(self.store.run_states()[-RECENT_RUNS:]):
            try:  # a damaged run is named on the runs page; here it is left out
                # (n_min the ledger's, which StartRun opened at the config's min_devices: the
                # config is not read, nor the deny list)
                row = self.store.run_head(run_id)
                n_min, rounds = stored_ledger(row).n_min, self.store.rounds(run_id)
                runs.append((row, n_min, rounds, _settled(n_min, now, rounds)))
            except StoreDamaged:
                continue
        return FleetRead(tuple(runs), self.reader.fleet(),
                         tuple(self.reader.recent_enrollments(10)))
