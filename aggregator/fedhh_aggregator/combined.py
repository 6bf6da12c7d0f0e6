"""One sharded round at the combiner: its shards on their workers, and the total.

The round's collector fetches every shard's outcome from its worker (GetResult, the same call
the coordinator makes of a single aggregator), adds each released shard sum into the total as
it arrives and keeps the shard's evidence (U3 and its survivors' signatures); the shard sum
itself is not kept. Once every shard has released or aborted, the round is released if at least
one shard released, else aborted. A shard that cannot be settled by its deadline (plus
``slack_s``) is cancelled at its worker; a worker that stays unreachable for ``patience_s``
past that leaves its shard aborted with ``reached_unmask`` true, since nobody can say
unmasking did not begin. An unexpected error collecting a shard (a bug) aborts the round at
once: the other collectors stop, running shards are cancelled at their workers and every held
shard sum is dropped, since the total may hold a sum whose evidence the combiner failed to keep.

A worker holds its released shard sum (GetResult's ``hold``) until the combiner tells it the
sum is delivered (CancelRound's ``delivered``), which it does once the coordinator confirmed
that it has the total and the journal says so, or to drop it (a plain CancelRound) once nobody
will fetch the total (cancelled, expired) or the sum itself (malformed, its round cancelled): a
combiner that stops before then takes the round over at its restart (also after its release:
``CombinerRegistry.restore``) and fetches every shard sum again into a new total, each counted
once. Before, a restarted combiner lost a total computed but not yet fetched, and a shard sum
nobody would fetch waited at its worker for the worker's --result-ttl.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import numpy as np

from fedhh.backoff import Backoff
from fedhh.errors import ConfigError, FedhhError, NotFoundError, StateError
from fedhh.rpc.aggregator_client import RoundAborted, RoundOutcome
from fedhh.rpc.control_client import OutcomeView, passing, patiently, persevere
from fedhh.secagg import RoundConfig, SignedConfig
from fedhh_aggregator.rounds import RoundState, check_tombstone_ttl, round_label, wait_capped
from fedhh_aggregator.workers import WorkerPool

__all__ = ["CombinedRound", "CombinerLimits", "Shard", "plan_id"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CombinerLimits:
    max_rounds: int = 64  # sharded rounds held at once (running, or finished and unfetched)
    max_wait_s: float = 30.0  # cap of a GetResult long-poll
    result_ttl_s: float = 600.0  # a finished round's total waits this long for its fetch
    slack_s: float = 120.0  # past a shard's last deadline, for its unmasking and the transfer
    patience_s: float = 120.0  # past that, for an unreachable worker to answer again
    max_round_s: float = 3600.0  # a shard config's last deadline may be at most this far ahead
    max_tombstones: int = 4096
    tombstone_ttl_s: float = 7 * 24 * 3600.0  # at least max_round_s (check_tombstone_ttl)

    def __post_init__(self) -> None:
        for name in ("max_rounds", "max_tombstones"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("max_wait_s", "result_ttl_s", "slack_s", "patience_s", "max_round_s",
                     "tombstone_ttl_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)!r}")
        check_tombstone_ttl(self.tombstone_ttl_s, self.max_round_s)


@dataclass
class Shard:
    """One shard: its signed config, its worker, and what became of it."""

    index: int
    signed: SignedConfig
    config: RoundConfig
    worker: int
    state: RoundState = RoundState.RUNNING
    reached_unmask: bool = False
    reason: str = ""
    contributors: int = 0
    survivors: tuple[int, ...] = ()
    signatures: tuple[tuple[int, bytes], ...] = field(default=(), repr=False)
    # Its worker accepted its OpenRound: in this process, or, for a shard taken over after a
    # restart, as the journal's ``shards_opened`` record says (without it the combiner may
    # have stopped before the open reached the worker).
    opened: bool = False

    @property
    def round_id(self) -> bytes:
        return self.config.round_id


# The first and the longest pause between two tries of a word to a worker that holds a
# shard sum (``drop_held``), or of a cancel or an outcome asked of a worker that is away
# (``CombinedRound._abort``, ``CombinedRound._settle_from_outcome``).
DROP_RETRY_S = 0.2
DROP_RETRY_MAX_S = 5.0


async def drop_held(pool: WorkerPool, shards: list[Shard], *, delivered: bool,
                    patience_s: float) -> None:
    """Tell each shard's worker to drop the sum it holds for the total, as ``delivered`` or
    not, tried again while the worker cannot be reached (restarting, busy: ``patiently``)
    for up to ``patience_s``; a worker that refuses it or stays away keeps the sum until its
    --result-ttl. Before, one try: a worker restarting as it was told held the sum to its
    --result-ttl (600 s by default), memory the round no longer needed."""
    async def one(shard: Shard) -> None:
        control = pool[shard.worker].control
        await patiently(lambda: (control.cancel(shard.round_id, delivered=True) if delivered
                                 else control.cancel(shard.round_id)),
                        patience_s, Backoff(DROP_RETRY_S, DROP_RETRY_MAX_S))

    await asyncio.gather(*(one(s) for s in shards))


def plan_id(shards: list[Shard]) -> bytes:
    """The round's 32-byte identity: SHA-256 over its shards' signed configs and workers."""
    digest = hashlib.sha256(b"fedhh/combiner/v1/plan")
    for shard in shards:
        digest.update(len(shard.signed.payload).to_bytes(4, "big") + shard.signed.payload)
        digest.update(shard.worker.to_bytes(4, "big"))
    return digest.digest()


def _sum_fault(shard: Shard, total: np.ndarray) -> str:
    """What makes a worker's released sum one its shard's signed config rules out ("" if
    nothing): another dimension (before: a half-length sum raised in the round's task, which
    died unseen and left the round running to its deadline; a one-entry sum was broadcast
    over the whole total) or another modulus. A lost shard after unmasking is charged at
    n_min by the coordinator's rules."""
    config = shard.config
    if total.shape != (config.dimension,):
        return f"{total.size} entries, its shard's config has {config.dimension}"
    if total.dtype.itemsize * 8 != config.modulus_bits:
        return (f"taken modulo 2^{total.dtype.itemsize * 8}, its shard's config says "
                f"2^{config.modulus_bits}")
    return ""


class CombinedRound:
    """A sharded round (module docstring). ``on_finish`` is told once, when it releases or
    aborts (the state it takes; a release is seen once the future it returns, the journal's
    write, is done); ``on_unmask`` the first time a shard is known to have reached
    unmasking; ``on_expire`` when its outcome waited ``result_ttl_s`` unfetched."""

    def __init__(self, round_id: bytes, shards: list[Shard], pool: WorkerPool,
                 limits: CombinerLimits,
                 on_finish: Callable[[CombinedRound, RoundState],
                                     concurrent.futures.Future[None] | None],
                 on_unmask: Callable[[CombinedRound], None],
                 on_expire: Callable[[CombinedRound], None],
                 telling: set[asyncio.Task[None]] | None = None) -> None:
        self.round_id = round_id
        self.shards = shards
        self.pool = pool
        self.limits = limits
        self.session_id = plan_id(shards)
        self.dimension = shards[0].config.dimension
        # The total over the released shards cannot exceed the devices of all shards.
        self.modulus_bits = 16 if sum(s.config.num_devices for s in shards) < 1 << 16 else 32
        self.state = RoundState.RUNNING
        self.abort_reason = ""
        self.total: np.ndarray | None = None
        self.finished = asyncio.Event()
        self.sent_held = False  # (``RoundBook._expired``)
        self._on_finish, self._on_unmask, self._on_expire = on_finish, on_unmask, on_expire
        self._unmask_told = False
        self._task: asyncio.Task[None] | None = None
        # (``_drop_held``'s tasks: the registry's, which its close cancels)
        self._telling = set() if telling is None else telling
        # Set for a round taken over after its release (a restart): its contributors then.
        # Its shards finished before, so their deadlines may be long past (``_collect``).
        self.released_with: int | None = None
        # and the shards whose sums made that total, where the journal says (None: it does
        # not, a journal from before it did)
        self._released_from: frozenset[int] | None = None
        self._cut_short = False  # settled as released before its total was rebuilt
        self._aborting = False  # (``cancel`` waits for an abort under way)
        self._started = 0.0

    @property
    def released_before(self) -> bool:
        return self.released_with is not None

    @property
    def reached_unmask(self) -> bool:
        return self.released_before or any(s.reached_unmask for s in self.shards)

    @property
    def contributors(self) -> int:
        if self._cut_short and self.released_with is not None:
            return self.released_with
        return sum(s.contributors for s in self.shards if s.state == RoundState.RELEASED)

    def take_over_released(self, contributors: int, shards: tuple[int, ...] | None,
                           lost: tuple[int, ...] | None = None) -> None:
        """Mark a round taken over after its release (a restart), with ``contributors``,
        its total made of the sums of ``shards`` (indices; None: not recorded): only those
        are fetched again, each other shard is aborted up front. A shard the combiner gave
        up on before the release (its worker unreachable past ``patience_s``) may hold a
        released sum at its worker all the same: taken in now, it stood in for a shard whose
        sum was lost meanwhile, the same count (equal shards) and another total. Those
        others reached unmasking as ``lost`` says (None: not recorded, each is taken to
        have): the coordinator charges the total at n_min where one did, and refuses a
        resumed total charged otherwise than before (before, each was said to have, and
        the same total, rebuilt whole, was refused where none had). (Set before
        :meth:`start`, before the journal is open: nothing is journaled here.)"""
        self.released_with = contributors
        if shards is None:
            return
        self._released_from = frozenset(shards)
        for shard in self.shards:
            if shard.index not in self._released_from:
                shard.state = RoundState.ABORTED
                shard.reached_unmask = lost is None or shard.index in lost
                shard.reason = "its sum was not in the total released before a restart"

    def start(self) -> None:
        self._started = time.time()
        self._task = asyncio.create_task(self._run(), name=f"combined {round_label(self.round_id)}")

    def stop(self) -> None:
        """Stop collecting (the combiner stops or forgets the round); the shards keep running
        at their workers."""
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        self.total = None

    # -- collection ----------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            failure = await self._collect_all()
            short = self._rebuilt_short()
            if failure:
                await self._abort(f"the combiner failed collecting it ({failure})",
                                  "the combiner failed collecting the round")
            elif short:
                await self._abort(short, short)
            else:
                await self._settle()
        except asyncio.CancelledError:
            return
        await self._expire()

    async def _collect_all(self) -> str:
        """Collect every shard; "" once all settled, else what failed unexpectedly (a bug),
        the other collectors stopped. A bug's round is aborted whole (``_run``): its total
        may hold a sum whose evidence it failed to keep, and a collector left running would
        add to the total after the round settled. Before, the round settled at once without
        the failed shard, released what it had, and the other collectors ran on unseen."""
        try:
            async with asyncio.TaskGroup() as group:
                for shard in self.shards:
                    group.create_task(self._collect_or_say(shard))
        except Exception as failed:  # (an ExceptionGroup of each collector's bug)
            errors = failed.exceptions if isinstance(failed, ExceptionGroup) else (failed,)
            return "; ".join(map(str, errors))
        return ""

    def _rebuilt_short(self) -> str:
        """Why a round taken over after its release may not release the total rebuilt ("" if
        it may): fewer contributors than it released with, a shard's held sum lost meanwhile
        (its worker restarted, or its --result-ttl passed). The coordinator may have read the
        released total and charged the attempt at its count (once: a resumed attempt is not
        charged again), so another, smaller total is never released: with the first, it would
        tell the lost shard's sum. Before, it was released as the round's."""
        if self.released_with is None:
            return ""
        rebuilt = sum(s.contributors for s in self.shards if s.state == RoundState.RELEASED)
        made_of = {s.index for s in self.shards if s.state == RoundState.RELEASED}
        if rebuilt == self.released_with and self._released_from in (None, made_of):
            return ""
        return (f"its total, released before a restart with {self.released_with} "
                f"contributors, was rebuilt with {rebuilt}: a shard's held sum was lost "
                "meanwhile")

    async def _collect_or_say(self, shard: Shard) -> None:
        try:
            await self._collect(shard)
        except Exception as error:
            log.exception("collecting a shard failed", extra={
                "round_id": round_label(self.round_id), "shard": round_label(shard.round_id),
                "worker": shard.worker})
            raise RuntimeError(f"shard {shard.index}: {type(error).__name__}: {error}"
                               ) from error

    async def _expire(self) -> None:
        """Hand the finished round to ``on_expire`` once its outcome waited ``result_ttl_s``
        unfetched."""
        try:
            await asyncio.sleep(self.limits.result_ttl_s)
        except asyncio.CancelledError:
            return
        log.warning("sharded round expired unfetched" if not self.sent_held else
                    "sharded round expired: sent, never said stored",
                    extra={"round_id": round_label(self.round_id), "state": self.state.value})
        self._on_expire(self)

    async def _collect(self, shard: Shard) -> None:
        worker = self.pool[shard.worker].control
        deadline = shard.config.deadlines.unmask / 1000 + self.limits.slack_s
        if self.released_before:  # (a cancel at a passed deadline would drop a held sum)
            deadline = max(deadline, self._started + self.limits.slack_s)
        give_up = deadline + self.limits.patience_s
        backoff = Backoff(0.2, 5.0)
        while shard.state == RoundState.RUNNING:
            remaining = deadline - time.time()
            try:
                if remaining <= 0:
                    await worker.cancel(shard.round_id)
                    await self._settle_from_outcome(shard, "the shard did not finish by its "
                                                    "deadline", give_up)
                    return
                result = await worker.result(shard.round_id, remaining, hold=True)
            except RoundAborted as aborted:
                self._shard_finished(shard, RoundState.ABORTED, aborted.reason,
                                     aborted.reached_unmask)
            except TimeoutError:
                continue  # the deadline has passed now: cancelled above
            except (StateError, NotFoundError) as gone:
                # Delivered to a previous combiner that stopped before it took the sum in, or
                # forgotten by a worker without a journal.
                await self._settle_from_outcome(shard, f"the worker no longer holds it ({gone})",
                                                give_up)
            except (grpc.aio.AioRpcError, FedhhError) as error:
                if not passing(error):
                    # A refusal (of the read, or of the cancel at the deadline) that no later
                    # try changes: the shard is settled now. Before, the call was tried again
                    # until the deadline and --patience-seconds had passed.
                    log.warning("a worker refused a shard's call", extra={
                        "round_id": round_label(self.round_id), "worker": shard.worker,
                        "shard": round_label(shard.round_id), "error": _describe(error)})
                    why = f"worker {shard.worker} refused the shard: {_describe(error)}"
                    if remaining > 0:
                        await self._cancel_and_settle(shard, why, give_up)
                    else:  # (the cancel was refused)
                        await self._settle_from_outcome(shard, why, give_up, cancelled=False)
                    return
                if time.time() >= give_up:
                    self._shard_finished(shard, RoundState.ABORTED, "worker unreachable: "
                                         f"{_describe(error)}", True)
                    return
                await backoff.sleep()
            else:
                fault = _sum_fault(shard, result.total)
                if fault:  # a sum the shard's devices could not have made: the worker lies
                    log.warning("a worker's sum breaks its shard's config", extra={
                        "round_id": round_label(self.round_id), "worker": shard.worker,
                        "shard": round_label(shard.round_id), "fault": fault})
                    self._shard_finished(shard, RoundState.ABORTED,
                                         f"the worker's sum is malformed: {fault}", True)
                    self._drop_held([shard], delivered=False)
                    return
                if self.total is None:
                    self.total = np.zeros(self.dimension, dtype=np.int64)
                self.total += result.total.astype(np.int64, copy=False)
                shard.survivors, shard.signatures = result.survivors, result.signatures
                shard.contributors = result.num_contributors
                self._shard_finished(shard, RoundState.RELEASED, "", True)

    async def let_go(self, written: concurrent.futures.Future[None] | None, *,
                     delivered: bool) -> None:
        """Tell each released shard's worker to drop its held sum, as ``delivered`` (the
        coordinator has the total) or not (nobody will fetch it), once the journal says so
        (``written``; None: no journal): before that a restarted combiner takes the round over
        and fetches the shard sums again. A write that failed leaves them held (the workers
        drop them at their --result-ttl), as does a worker that does not answer. A round
        settled before its total was rebuilt (:meth:`settle_as_released`) tells every shard
        not known aborted: each may hold the sum it released before the restart."""
        if written is not None:
            try:
                await asyncio.wrap_future(written)
            except OSError:
                return
        holding = (lambda s: s.state != RoundState.ABORTED) if self._cut_short else (
            lambda s: s.state == RoundState.RELEASED)
        await drop_held(self.pool, [s for s in self.shards if holding(s)],
                        delivered=delivered, patience_s=self.limits.result_ttl_s)

    def _drop_held(self, shards: list[Shard], *, delivered: bool) -> None:
        """``drop_held`` in a task of its own, kept till it ends: the round settles (an abort,
        a refused shard) without waiting for workers that are away."""
        task = asyncio.create_task(drop_held(self.pool, shards, delivered=delivered,
                                             patience_s=self.limits.result_ttl_s),
                                   name=f"drop shard sums of {round_label(self.round_id)}")
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    async def _cancel_and_settle(self, shard: Shard, why: str, give_up: float) -> None:
        """Cancel a running shard at its worker, asked again while the worker is away
        (``persevere``) until ``give_up`` (wall clock), and settle it by the worker's word
        within the same patience (:meth:`_settle_from_outcome`)."""
        control = self.pool[shard.worker].control
        cancelled = False
        with contextlib.suppress(grpc.aio.AioRpcError, FedhhError):
            await persevere(lambda: control.cancel(shard.round_id), _loop_time(give_up),
                            Backoff(DROP_RETRY_S, DROP_RETRY_MAX_S))
            cancelled = True
        await self._settle_from_outcome(shard, why, give_up, cancelled=cancelled)

    async def _settle_from_outcome(self, shard: Shard, why: str, give_up: float, *,
                                   cancelled: bool = True) -> None:
        """An aborted shard whose ``reached_unmask`` comes from its worker's word, or is
        assumed (its worker cannot say). The word is asked again while the worker is away
        (``persevere``: restarting, busy) until ``give_up`` (wall clock); an answer no later
        try changes is taken at once. Before, it was asked once: a worker busy or restarting
        at that moment left the shard charged at n_min, though its word would have said the
        shard never reached unmasking. ``cancelled``: the worker took the shard's cancel;
        one that did not and says the shard still runs may yet unmask it, so nobody can say
        unmasking did not begin (before, its "running" was taken for a shard that never
        would)."""
        outcome: RoundOutcome | None = None
        control = self.pool[shard.worker].control
        with contextlib.suppress(grpc.aio.AioRpcError, FedhhError):
            outcome = await persevere(lambda: control.outcome(shard.round_id),
                                      _loop_time(give_up), Backoff(DROP_RETRY_S,
                                                                   DROP_RETRY_MAX_S))
        if outcome is None or (outcome.state == "unknown" and not outcome.durable):
            reached = True  # nobody can say it did not begin
        elif outcome.state == "running" and not cancelled:
            reached = True
            why = (f"{why}; worker {shard.worker} still runs it, its cancel not taken: "
                   "nobody can say its unmasking will not begin")
        elif outcome.state == "unknown" and shard.opened:
            # A journaling worker that has no record of a shard it accepted lost its record
            # (restarted on another state dir, or as another worker): unmasking may have
            # begun there. Before, its "unknown" read as never opened and the shard was free.
            reached = True
            why = (f"worker {shard.worker} journals its rounds but has no record of the shard "
                   "it accepted (its journal was replaced): nobody can say whether unmasking "
                   "began")
            log.warning("a worker lost its record of a shard", extra={
                "round_id": round_label(self.round_id), "shard": round_label(shard.round_id),
                "worker": shard.worker})
        else:
            reached = outcome.reached_unmask or outcome.state == "released"
        reason = outcome.abort_reason if outcome is not None and outcome.abort_reason else why
        self._shard_finished(shard, RoundState.ABORTED, reason, reached)

    def _shard_finished(self, shard: Shard, state: RoundState, reason: str,
                        reached_unmask: bool) -> None:
        shard.state, shard.reason = state, reason
        shard.reached_unmask = shard.reached_unmask or reached_unmask
        log.info("shard finished", extra={
            "round_id": round_label(self.round_id), "shard": round_label(shard.round_id),
            "worker": shard.worker, "state": state.value, "reason": reason,
            "contributors": shard.contributors, "reached_unmask": shard.reached_unmask})
        self.observe_unmask()

    def observe_unmask(self) -> None:
        if self.reached_unmask and not self._unmask_told:
            self._unmask_told = True
            self._on_unmask(self)

    async def _settle(self) -> None:
        """Release the round if a shard released, else abort it. A release is seen (GetResult,
        GetOutcome) only once its ``finish`` is on disk, so that a restart after anyone may
        have read the total takes it over as released (``_rebuilt_short``); a finish that
        cannot be written aborts the round. Before, the total could be read while its finish
        was being written, and a combiner killed then took the round over as running, its
        total rebuilt without that guard."""
        released = [s for s in self.shards if s.state == RoundState.RELEASED]
        if not released:
            self.state = RoundState.ABORTED
            self.abort_reason = "no shard released: " + "; ".join(
                f"{round_label(s.round_id)}: {s.reason}" for s in self.shards)
            log.warning("sharded round aborted", extra={
                "round_id": round_label(self.round_id), "reached_unmask": self.reached_unmask})
            self.finished.set()
            self._on_finish(self, RoundState.ABORTED)
            return
        written = self._on_finish(self, RoundState.RELEASED)
        if written is not None:
            try:
                await asyncio.wrap_future(written)
            except OSError as error:
                why = f"the combiner cannot record its release: {error}"
                await self._abort(why, why)
                return
        self.state = RoundState.RELEASED
        log.info("sharded round released", extra={
            "round_id": round_label(self.round_id), "shards": len(self.shards),
            "released": len(released), "contributors": self.contributors})
        self.finished.set()

    # -- the coordinator's side ----------------------------------------------------------------

    async def wait_finished(self, wait_s: float) -> RoundState:
        await wait_capped(self.finished, wait_s, self.limits.max_wait_s)
        return self.state

    async def _abort(self, reason: str, why: str) -> None:
        """Abort the round for ``reason``, its collectors stopped: each running shard is
        cancelled at its worker and settled by its word (``why`` where it has none), the sums
        released shards' workers hold are dropped; nothing is released. A worker away for the
        cancel or the word (restarting, busy) is asked again for up to ``patience_s``, one
        patience for both (``persevere``). Before, each was asked once: a worker busy at that
        moment left its shard charged at n_min, though its word would have said the shard
        never reached unmasking."""
        self._aborting = True
        running = [s for s in self.shards if s.state == RoundState.RUNNING]
        released = [s for s in self.shards if s.state == RoundState.RELEASED]

        self._drop_held(released, delivered=False)
        settled = await asyncio.gather(
            *(self._cancel_and_settle(s, why, time.time() + self.limits.patience_s)
              for s in running), return_exceptions=True)
        for error in settled:
            if isinstance(error, Exception):  # (a bug: the round aborts all the same)
                log.error("aborting a sharded round failed", exc_info=error,
                          extra={"round_id": round_label(self.round_id)})
        for shard in running:
            if shard.state == RoundState.RUNNING:  # (its settling failed: nobody can say)
                self._shard_finished(shard, RoundState.ABORTED, why, True)
        self.total = None
        self.state = RoundState.ABORTED
        self.abort_reason = reason
        log.warning("sharded round aborted", extra={
            "round_id": round_label(self.round_id), "reason": reason,
            "reached_unmask": self.reached_unmask})
        self.finished.set()
        self._on_finish(self, RoundState.ABORTED)

    def settle_as_released(self) -> bool:
        """Settle a round taken over after its release, its total still being rebuilt, as
        the released round it was (True; False for any other round): the coordinator said it
        read the total, before the restart, or cancelled it, so nothing more is fetched. Its
        outcome is journaled already; forgetting it tells the workers (:meth:`let_go`).
        Before, such a call aborted the round as a running one: a total the coordinator had
        stored was journaled 'aborted, cancelled' and its held shard sums dropped as such."""
        if not self.released_before or self.state != RoundState.RUNNING:
            return False
        if self._task is not None:
            self._task.cancel()
        self._cut_short = True
        self.total = None
        self.state = RoundState.RELEASED
        self.finished.set()
        log.info("sharded round settled as released before its total was rebuilt",
                 extra={"round_id": round_label(self.round_id)})
        return True

    async def cancel(self) -> RoundState:
        """Abort every running shard at its worker, and drop the sums its released shards'
        workers hold for it; the round releases nothing. A round released before a restart
        stays released (:meth:`settle_as_released`), its total dropped. The abort runs in a
        task of its own, which a second cancel (the coordinator's, asked again past its call's
        deadline while a worker is away) waits for too; the round's state once it ended."""
        if self.settle_as_released():
            return self.state
        if not self._aborting:
            if self.state != RoundState.RUNNING:
                return self.state
            if self._task is not None:
                self._task.cancel()
            self._aborting = True
            # Expired as a settled round is: the cancel stopped the collector that would
            # have. Before, a round cancelled and never fetched (the coordinator asks its
            # outcome) held one of max_rounds until a restart.
            self._task = asyncio.create_task(self._cancelled(),
                                             name=f"cancelled {round_label(self.round_id)}")
        await self.finished.wait()
        return self.state

    async def _cancelled(self) -> None:
        try:
            await self._abort("cancelled", "cancelled")
        except asyncio.CancelledError:
            return
        await self._expire()

    async def live_outcomes(self) -> list[RoundOutcome | None]:
        """Each running shard's outcome from its worker now (None: unreachable, or not
        running); finished shards are None (the combiner knows them)."""
        outcomes = await asyncio.gather(*(self.live_outcome(s) for s in self.shards))
        self.observe_unmask()
        return list(outcomes)

    async def live_outcome(self, shard: Shard, seen: OutcomeView | None = None,
                           wait_s: float = 0.0) -> RoundOutcome | None:
        """A running shard's outcome from its worker (None: unreachable, or not running); with
        ``seen``, once its worker's view of it is no longer ``seen``, or after ``wait_s``
        (its worker's long-poll: ``AggregatorControl.outcome``)."""
        if shard.state != RoundState.RUNNING:
            return None
        control = self.pool[shard.worker].control
        with contextlib.suppress(grpc.aio.AioRpcError, FedhhError):
            outcome = await (control.outcome(shard.round_id) if seen is None else
                             control.outcome(shard.round_id, seen, wait_s))
            if outcome.reached_unmask:
                shard.reached_unmask = True
                self.observe_unmask()
            return outcome
        return None


def _loop_time(wall: float) -> float:
    """The event loop's clock at wall-clock time ``wall`` (the shards' deadlines are the
    latter's; ``persevere`` counts on the former)."""
    return asyncio.get_running_loop().time() + wall - time.time()


def _describe(error: BaseException) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return error.code().name
    return str(error)
