"""Runs the coordinator's runs one at a time, in creation order, each with the library's round
driver (``fedhh.rounds.RoundDriver``) over the network link (``NetworkLink``).

The round rules (what is charged and when, aborts, bounded retries, settling attempts a
previous process left open) are the driver's; this module keeps the service's concerns: which
run goes next, the run's state in the store, cancellation, metrics and logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.backoff import Backoff
from fedhh.errors import FedhhError
from fedhh.rounds import AttemptId, RoundDriver, RunCancelled
from fedhh.rpc.control_client import CALL_TIMEOUT_S
from fedhh.rpc.device_client import OVERRUN_S
from fedhh.server import RoundReport
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import metrics
from fedhh_coordinator.aggregation import AggregatorApi, ControlTokenRefused, DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget, RunAdmission, settle_run_charge
from fedhh_coordinator.db.interface import StoreCorrupt, StoreUnavailable
from fedhh_coordinator.link import AGGREGATOR_PATIENCE_S, AGGREGATOR_POLL_S, NetworkLink
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.plans import stored_cohort
from fedhh_coordinator.progress import Progress, RunChanges
from fedhh_coordinator.runs import RunParts
from fedhh_coordinator.store import ACTIVE, RunAttempts, Store

log = logging.getLogger(__name__)
# The longest wait between two polls of a store that is unavailable.
STORE_RETRY_MAX_S = 30.0
# How long a charge before a sum's read is retried while the store is unavailable, and the
# longest pause between tries (Runner.write_charge): a PostgreSQL restart or failover takes
# seconds, and the sum's stream waits for it unread. A released sum's header arrives with
# about CALL_TIMEOUT_S left on its GetResult's deadline (the wait it asked for plus
# CALL_TIMEOUT_S; the service answers within the wait), and every try starts within the
# patience: half of it, so that the other half holds the last try (PostgreSQL's 10 s connect
# timeout and its 1 s lock wait at most) and the sum's read. Before, the patience was the whole
# 30 s, and a charge written late in it found the call past its deadline: the sum lost unread
# and the round run again, charged twice. Derived, so that the two cannot drift apart. A store
# away past it loses nothing: the service holds the unread sum (GetResult's hold), and the
# attempt is resumed, and its sum read, once the store answers (only a longer wait, the call's).
CHARGE_PATIENCE_S = CALL_TIMEOUT_S / 2
CHARGE_RETRY_MAX_S = 4.0
# A running run's error while its cancel waits for the round under way (Runner.cancel).
CANCEL_ASKED = "cancelled by the operator: the run stops once the round under way ends"


class Runner:
    """Drives the oldest pending or running run; sleeps until woken when there is none."""

    def __init__(self, store: Store, aggregator: AggregatorApi, key: Ed25519PrivateKey,
                 aggregator_address: DeviceAddresses, lobby: Lobby, budget: LifetimeBudget
                 ) -> None:
        self.store = store
        self.budget = budget
        self.aggregator = aggregator
        self.key = key
        self.aggregator_address = aggregator_address
        self.lobby = lobby
        self._wake = asyncio.Event()
        self._cancelled: set[str] = set()
        self._cancelled_by: dict[str, str] = {}  # who asked, for the log of the run's end
        # Set, and replaced, at each cancel: a driver's pause after an aborted attempt waits on
        # it (``RoundDriver.cancel_asked``).
        self._cancel_asked = asyncio.Event()
        self.retry_delay_s = 1.0
        # How long an unreachable aggregation service is waited for, before an attempt or
        # once it ran the attempt's round (--aggregator-patience-seconds), and the first pause
        # between polls (``NetworkLink._await_aggregator``, ``NetworkLink._patient_outcome``).
        self.aggregator_patience_s = AGGREGATOR_PATIENCE_S
        self.aggregator_poll_s = AGGREGATOR_POLL_S
        # How long the charge before a sum's read is retried while the store is unavailable
        # (``write_charge``), and the first pause between tries.
        self.charge_patience_s = CHARGE_PATIENCE_S
        self.charge_retry_s = 0.25
        self.progress: dict[str, Progress] = {}  # of the running runs
        self.changes = RunChanges()  # (what GetRun's long-poll waits on)
        # The last store outage's pauses (_await_store), which the next one within
        # STORE_RETRY_MAX_S goes on from
        self._outage_backoff: Backoff | None = None
        self._outage_ended_at = float("-inf")
        # The runs a store outage interrupted: their open attempts are settled as left by it
        # (as by a stopped coordinator, but this one went on).
        self._interrupted: set[str] = set()

    def wake(self) -> None:
        self._wake.set()

    def cancel(self, run_id: str, by: str = "the operator") -> None:
        """Cancel a running run once the round under way ends; a round still in its check-in
        (or waiting for the aggregation service) ends at once, nothing drawn or charged. The
        request is stored with the run (``CANCEL_ASKED``): before, it was held in this process
        alone, so a coordinator stopped before the round ended resumed the run on restart as
        if never cancelled. ``by``: who asked, named in the log when the run ends."""
        self.store.ask_cancel(run_id, CANCEL_ASKED)
        self._cancelled.add(run_id)
        self._cancelled_by.setdefault(run_id, by)
        self._wake.set()
        self.lobby.recheck()
        self._cancel_asked.set()
        self._cancel_asked = asyncio.Event()
        self.changes.changed(run_id)

    async def serve(self) -> None:
        """Drive the active runs, oldest first. The database lost for a while (a PostgreSQL
        restart or failover: ``StoreUnavailable``) fails no run and stops nothing: the runner
        waits for it, polling it every ``STORE_RETRY_MAX_S`` at most, and then resumes the run
        from what the store holds, as a restarted coordinator does (``RoundDriver.resume``
        settles the attempt that was under way). Before, the run was marked failed for good,
        or, with the database still down, the coordinator stopped."""
        while True:
            try:
                await self._serve_one()
            except StoreUnavailable as error:
                await self._await_store(error)

    async def _await_store(self, error: StoreUnavailable) -> None:
        """Return once the store answers again (polled with a doubling backoff). An outage
        that follows the last one within ``STORE_RETRY_MAX_S`` goes on from its backoff: a
        store that reads but cannot write (a full disk) answers the poll at once and fails
        the resumed run's first write, which would otherwise come round every second."""
        metrics.STORE_OUTAGES.inc()
        log.error("the store is unavailable; the runs wait for it", extra={"error": str(error)})
        recent = time.monotonic() - self._outage_ended_at < STORE_RETRY_MAX_S
        if not recent or self._outage_backoff is None:
            self._outage_backoff = Backoff(self.retry_delay_s, STORE_RETRY_MAX_S)
        while True:
            await self._outage_backoff.sleep()
            try:
                self.store.run_states(ACTIVE)
            except StoreUnavailable:
                continue
            log.warning("the store answers again; the runs resume from it")
            self._outage_ended_at = time.monotonic()
            return

    async def _serve_one(self) -> None:
        """Wait for an active run, or drive the oldest until it ends."""
        while True:
            active = self.store.run_states(ACTIVE)
            if not active:
                self._wake.clear()
                await self._wake.wait()
                continue
            run_id = active[0][0]
            try:
                await self.drive(run_id)
            except StoreUnavailable:
                self._interrupted.add(run_id)
                raise  # the run is not at fault: it resumes once the store answers
            except StoreCorrupt:
                raise  # nor here; the coordinator stops, nothing more written to the file
            except ControlTokenRefused:
                # Nor here: the run stays as it is, its attempt unsettled, and the coordinator
                # stops until it holds the service's token (``ControlTokenRefused``). Before,
                # the attempt was settled unknown, charged at n_min.
                raise
            except RunCancelled as cancelled:
                self.store.set_run_state(run_id, "cancelled", str(cancelled))
                self._log_cancelled(run_id)
            except FedhhError as error:
                log.error("run failed", extra={"run_id": run_id, "error": str(error)})
                self.store.set_run_state(run_id, "failed", str(error))
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a bug: fail the run, keep the service up
                log.exception("run crashed", extra={"run_id": run_id})
                self.store.set_run_state(run_id, "failed", f"internal error: {error}")
            finally:
                self.lobby.clear()
                self.progress.pop(run_id, None)
                self.changes.changed(run_id)  # (its state, or its progress gone)

    def _log_cancelled(self, run_id: str) -> None:
        """Say that a run ended cancelled: the round it stopped after and who asked. Before,
        the run went to "cancelled" in the store, and the coordinator's log said nothing."""
        progress = self.progress.get(run_id)
        ran = progress is not None and progress.round > 0  # (0: no round entered yet)
        by = self._cancelled_by.pop(run_id, "the operator, before this coordinator started")
        self._cancelled.discard(run_id)
        log.info("run cancelled", extra={
            "run_id": run_id, "round": progress.round if ran and progress else None,
            "attempt": progress.attempt if ran and progress else None, "by": by})

    async def write_charge(self, write: Callable[[], None]) -> None:
        """The charge that lets a released sum be read (``RoundDriver.write_charge``), tried
        again while the store is unavailable, for up to ``charge_patience_s`` (a PostgreSQL
        restart or failover, a SQLite file locked by another process), the sum waiting unread
        at the service meanwhile. Before, it failed at once: the sum was dropped unread, and
        the service, which had sent it, held it no more, so the attempt was charged as lost
        and its round run again (two charges for one round; seen in 2 of 8 PostgreSQL
        restarts during short runs). The write is the same each time: a try whose commit
        reached the database before its connection was lost is rewritten as it stands.

        No try starts past ``charge_patience_s`` (``CHARGE_PATIENCE_S`` says why): a pause
        that overran it (the event loop held by another task's synchronous call) ends the
        tries with the last one's error. Before, the try after it was made all the same. That
        error leaves the sum held unread at the service for the attempt's resume once the
        store answers (``NetworkLink._fetch``)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.charge_patience_s
        backoff, warned = Backoff(self.charge_retry_s, CHARGE_RETRY_MAX_S), False
        while True:
            try:
                write()
                return
            except StoreUnavailable as error:
                delay = backoff.pause()
                if loop.time() + delay > give_up:
                    raise
                unavailable = error
                if not warned:
                    warned = True
                    log.warning("the store is unavailable while a released sum waits for its "
                                "charge; trying again", extra={"error": str(error),
                                                               "patience_s":
                                                               self.charge_patience_s})
            await asyncio.sleep(delay)
            if loop.time() > give_up:
                raise unavailable

    def progress_of(self, run_id: str) -> pb.Progress | None:
        """The run's progress now (None unless it is running); during check-in, the pool's
        size so far."""
        progress = self.progress.get(run_id)
        if progress is None:
            return None
        if progress.phase == "check-in":
            progress.devices = self.lobby.cohort_size
        return progress.to_proto()

    def driver(self, parts: RunParts) -> RoundDriver:
        run_id = parts.run_id
        admission = RunAdmission(self.store, self.budget, run_id, parts.config.eps_agg,
                                 parts.config.delta)
        progress = self.progress.setdefault(
            run_id, Progress(changed=lambda: self.changes.changed(run_id)))
        link = NetworkLink(parts.config, parts.ledger.round_epsilon, self.store, self.aggregator,
                           self.lobby, self.key, self.aggregator_address, admission, progress,
                           cancelled=lambda: run_id in self._cancelled)
        link.aggregator_patience_s = link.recovery_patience_s = self.aggregator_patience_s
        link.aggregator_poll_s = self.aggregator_poll_s
        started = {"at": time.monotonic()}

        def on_round(attempt: AttemptId, report: RoundReport) -> None:
            seconds = time.monotonic() - started["at"]
            started["at"] = time.monotonic()
            metrics.ROUNDS.labels("released").inc()
            metrics.ROUND_SECONDS.observe(seconds)
            metrics.EPS_SPENT.labels(run_id).set(driver.ledger.spent_epsilon()
                                                 if driver.ledger else 0.0)
            log.info("round released", extra={"run_id": run_id, "round": attempt.round,
                                              "attempt": attempt.attempt,
                                              "contributors": report.participants,
                                              "kept": report.kept, "finished": report.finished})

        def on_abort(attempt: AttemptId, reason: str) -> None:
            started["at"] = time.monotonic()
            metrics.ROUNDS.labels("aborted").inc()
            log.warning("round aborted", extra={"run_id": run_id, "round": attempt.round,
                                                "attempt": attempt.attempt,
                                                "reason": reason})

        driver = RoundDriver(
            run_id=run_id, tree=parts.tree, store=RunAttempts(self.store, run_id), link=link,
            ledger=parts.ledger, min_contributors=parts.config.min_devices,
            max_attempts=parts.config.max_attempts, retry_delay_s=self.retry_delay_s,
            on_round=on_round, on_abort=on_abort,
            cancelled=lambda: run_id in self._cancelled,
            cancel_asked=lambda: self._cancel_asked.wait(), write_charge=self.write_charge,
            interrupted_by=("the store was unavailable" if run_id in self._interrupted
                            else RoundDriver.interrupted_by),
            retry_unsent=run_id in self._interrupted,
        )
        self._interrupted.discard(run_id)
        return driver

    async def drive(self, run_id: str) -> None:
        # The row read and its parts built off the event loop: its deny list decoded and made
        # into the tree's (~2.2 s with 1,000,000 items), which held the loop, no device or
        # caller answered, each time a run was driven, after every store outage too.
        row = await asyncio.to_thread(self.store.run, run_id)
        if row.error == CANCEL_ASKED:  # cancelled before a restart: stop at the first chance
            self._cancelled.add(run_id)
        parts = await asyncio.to_thread(RunParts.load, row)
        # (a CancelRun of the pending run may have cancelled it meanwhile, on the loop: driven
        # on, its rounds would open, charged, under a "cancelled" the caller was told)
        if run_id not in dict(self.store.run_states(ACTIVE)):
            return
        self._expect_last_cohort(run_id)
        driver = self.driver(parts)
        try:
            await driver.run(parts.state)
        except BaseException as stopped:
            self._settle(run_id, driver, parts.config.eps_agg, stopped)
            raise
        self._settle(run_id, driver, parts.config.eps_agg)
        self.store.set_run_state(run_id, "done")
        log.info("run done", extra={"run_id": run_id})

    def _settle(self, run_id: str, driver: RoundDriver, eps_agg: float,
                stopped: BaseException | None = None) -> None:
        """``settle_run_charge`` as the run ends, however it ends. A settlement that fails
        (the store unavailable) after the run stopped with ``stopped`` logs that first error
        and chains it (``raise ... from``): before, the store's error replaced it, and the
        operator saw only 'the store is unavailable', not why the run had stopped. A
        cancellation of the task (the service stopping) goes on as it was, the store's error
        logged: replaced, it left the runner waiting for the store instead of stopping. The
        settlement is made again when the run resumes."""
        try:
            spent = settle_run_charge(self.store, run_id, driver.ledger)
        except Exception as error:
            if stopped is None:
                raise
            log.error("the run stopped, and its lifetime charge could not be settled",
                      extra={"run_id": run_id, "stopped_by": f"{type(stopped).__name__}: "
                             f"{stopped}", "error": f"{type(error).__name__}: {error}"})
            if isinstance(stopped, Exception):
                raise error from stopped
            return  # (drive raises ``stopped`` itself)
        if spent is not None:
            log.warning("run over its budget: its devices are charged what it spent",
                        extra={"run_id": run_id, "eps_spent": spent, "eps_agg": eps_agg})

    def _expect_last_cohort(self, run_id: str) -> None:
        """Tell the lobby of the cohort the run's latest attempt drew, as stored (a previous
        process's, after a restart): its first check-in, if short of min_devices, is held for
        them until that attempt's last deadline plus the devices' overrun (``Lobby.expect``).
        Before, a restarted coordinator knew no cohort, so the hold did nothing there."""
        for row in reversed(self.store.rounds(run_id)):
            cohort = stored_cohort(row.summary)
            if cohort is None:
                continue
            members, deadline_ms = cohort
            busy_until = deadline_ms / 1000 + OVERRUN_S
            if time.time() < busy_until and self.lobby.expect(members, busy_until):
                log.info("the next check-in may be held for the stored cohort", extra={
                    "run_id": run_id, "round": row.round, "attempt": row.attempt,
                    "members": len(members), "until_s": round(busy_until - time.time(), 1)})
            return
