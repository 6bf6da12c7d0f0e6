"""The coordinator's control calls that the aggregator and the combiner both answer (GetResult,
CancelRound, GetOutcome), as transport-agnostic handlers (Flower's servicer -> handler split).

The servicers (``servicers.py``, ``combiner_service.py``) parse a request, call a handler and
turn its values into messages with ``control_wire``; the state changes are here: a round whose
abort was reported, or whose sum was streamed whole (or, held for the coordinator, confirmed
delivered), is forgotten and counted. A combiner's outcome merges its shards' outcomes, as
their workers tell them, into one answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import grpc
import numpy as np

from fedhh.errors import FedhhError, StateError
from fedhh.rpc.control_client import OutcomeView, RoundOutcome
from fedhh.secagg import Stage
from fedhh_aggregator import metrics
from fedhh_aggregator.combined import CombinedRound, Shard
from fedhh_aggregator.combiner import CombinerRegistry
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome, ShardOutcome
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.rounds import Round, RoundState

__all__ = ["COUNTS_COALESCE_S", "ControlHandler", "ResultEvidence", "ResultReport",
           "RoundControl", "ShardedRoundControl"]

# A watch (GetOutcome with ``seen``) told of a change of a running round's per-stage counts
# alone hears of it this long after its ask at the earliest, with what more came meanwhile: a
# sharded round's shards close each stage one by one, and each close would be a call of its
# own. A change of state or stage is told at once.
COUNTS_COALESCE_S = 3.0
# A worker that answers a watch's long-poll at once (a version before it: its answer is not
# ``watched``), or does not answer, is asked again after this long: the watch's pace before.
UNWATCHED_PACE_S = 1.0


@dataclass(frozen=True)
class ResultEvidence:
    """A released sum's contributors: U3 and their consistency signatures (of one shard, in a
    sharded round)."""

    survivors: tuple[int, ...]
    signatures: tuple[tuple[int, bytes], ...] = field(repr=False)
    shard: int = 0


@dataclass(frozen=True)
class ResultReport:
    """What GetResult streams: the round's state, then (released) the evidence and the sum."""

    state: RoundState
    round_id: bytes
    session_id: bytes
    dimension: int
    modulus_bits: int
    reached_unmask: bool
    abort_reason: str = ""
    shards: tuple[Shard, ...] = ()  # a finished sharded round's shards
    num_contributors: int = 0
    evidence: tuple[ResultEvidence, ...] = ()
    total: np.ndarray | None = field(default=None, repr=False)  # released: the sum


class _Finishing(Protocol):
    round_id: bytes
    state: RoundState
    sent_held: bool

    async def wait_finished(self, wait_s: float) -> RoundState: ...


R = TypeVar("R", bound=_Finishing)


class _Registry(Protocol[R]):
    fetcher: str  # (``RoundBook.fetcher``)

    @property
    def durable(self) -> bool: ...

    def by_round(self, round_id: bytes) -> R: ...

    def forget(self, round_: R, why: str, *, delivered: bool = False) -> None: ...

    async def cancel(self, round_id: bytes) -> RoundState: ...


class _Follow(ABC):
    """A round as one watch follows it: the outcome it has now, and a wait for what may
    change it."""

    @abstractmethod
    def now(self) -> RecordedOutcome:
        """The round's outcome as last seen."""

    @abstractmethod
    async def changed(self, until: float) -> None:
        """Return once the outcome may have changed (``now`` says), or at the loop's
        ``until``; at once if it cannot change any more."""

    @abstractmethod
    def close(self) -> None:
        """Stop whatever the watch left running."""


class ControlHandler(ABC, Generic[R]):
    """The calls both services answer alike; ``count(outcome)`` counts a round whose outcome
    reached the coordinator ("aborted" or "delivered")."""

    sum_name = "sum"

    def __init__(self, registry: _Registry[R], count: Callable[[str], None]) -> None:
        self._registry = registry
        self._count = count

    @property
    def durable(self) -> bool:
        """True iff outcomes survive a restart (a journal is kept)."""
        return self._registry.durable

    async def get_result(self, round_id: bytes, wait_s: float,
                         send: Callable[[ResultReport], Awaitable[None]], *,
                         hold: bool = False) -> None:
        """Wait up to ``wait_s`` for the round to finish and ``send`` its report. Once a
        finished round's report was sent whole (every chunk handed to the transport), the
        coordinator has it: the round is forgotten, leaving its tombstone. An aborted round is
        forgotten also when its report could not be sent (the call cancelled or cut: the
        coordinator crashed or left): the report carries no sum, and its tombstone answers
        GetOutcome; before, the round stayed held until its outcome expired.

        ``hold``: a released sum sent whole is kept, for another GetResult, until the
        coordinator says it read it (``cancel`` with ``delivered``) or its outcome expires.
        Handed to the transport is not read: the coordinator reads the sum only once its
        charge is stored, and a store that stays away past the call's deadline left a sum
        sent whole unread, and before, dropped here (the attempt charged as lost and its
        round run again)."""
        round_ = self._registry.by_round(round_id)
        state = await round_.wait_finished(wait_s)
        report = self._report(round_, state)
        try:
            await send(report)
        except BaseException:
            if state == RoundState.ABORTED:
                self._registry.forget(round_, "its abort report was not read; its outcome "
                                      "is kept for GetOutcome")
            raise
        if state == RoundState.ABORTED:
            self._registry.forget(round_, "its abort was reported to "
                                  f"{self._registry.fetcher}")
            self._count("aborted")
        elif state == RoundState.RELEASED and hold:
            round_.sent_held = True
        elif state == RoundState.RELEASED:
            self._delivered(round_)

    def _delivered(self, round_: R) -> None:
        self._registry.forget(round_, f"the {self.sum_name} was delivered to "
                              f"{self._registry.fetcher}",
                              delivered=True)
        self._count("delivered")

    async def cancel(self, round_id: bytes, *, delivered: bool = False) -> RoundState:
        """Abort a running round, or drop a finished one's sum; idempotent. ``delivered``:
        the coordinator read a released sum (held for it: ``get_result``'s ``hold``), dropped
        as delivered rather than cancelled."""
        if delivered:
            with contextlib.suppress(FedhhError):  # (no longer held: answered as a cancel)
                round_ = self._registry.by_round(round_id)
                if self._released(round_):
                    self._delivered(round_)
                    return RoundState.RELEASED
        return await self._registry.cancel(round_id)

    def _released(self, round_: R) -> bool:
        """Whether ``round_`` holds a released sum for the coordinator."""
        return round_.state == RoundState.RELEASED

    @abstractmethod
    def _report(self, round_: R, state: RoundState) -> ResultReport:
        """The report of ``round_`` in ``state``; StateError if its sum was delivered."""

    @abstractmethod
    async def outcome(self, round_id: bytes) -> RecordedOutcome:
        """What became of the round, as far as this service knows."""

    async def watch(self, round_id: bytes, seen: OutcomeView, wait_s: float
                    ) -> RecordedOutcome:
        """GetOutcome's long-poll (its request's ``seen``): the outcome once the round's
        state or stage is no longer ``seen``'s (at once for a round that does not run), or
        once ``wait_s`` (at most the service's long-poll cap) passed. A change of its
        per-stage counts alone is answered ``COUNTS_COALESCE_S`` after the ask at the
        earliest (or at ``wait_s``), with what more came meanwhile. Before, the coordinator
        asked every second while its round ran, and a combiner asked each of its workers at
        every ask: about 1 ms of CPU a side per TLS call, 5 ms a second at the coordinator
        and 12 at each worker of a round held open."""
        loop = asyncio.get_running_loop()
        asked = loop.time()
        until = asked + max(0.0, min(wait_s, self._wait_cap_s))
        follow = await self._follow(round_id)
        try:
            while True:
                outcome = follow.now()
                if outcome.state != OutcomeState.RUNNING or seen.moved(outcome):
                    return outcome
                by = until if OutcomeView.of(outcome) == seen else \
                    min(until, asked + COUNTS_COALESCE_S)
                if loop.time() >= by:
                    return outcome
                await follow.changed(by)
        finally:
            follow.close()

    @property
    @abstractmethod
    def _wait_cap_s(self) -> float:
        """The longest a long-poll of this service waits (an aggregator's --max-wait-ms)."""

    @abstractmethod
    async def _follow(self, round_id: bytes) -> _Follow:
        """The round as a watch follows it."""


def _count_aggregator(outcome: str) -> None:
    (metrics.ROUNDS_DELIVERED if outcome == "delivered" else metrics.ROUNDS_ABORT_REPORTED).inc()


class RoundControl(ControlHandler[Round]):
    """The aggregator's control calls, over its :class:`RoundRegistry`."""

    def __init__(self, registry: RoundRegistry) -> None:
        super().__init__(registry, _count_aggregator)
        self.rounds = registry

    def _report(self, round_: Round, state: RoundState) -> ResultReport:
        cfg = round_.config
        report = ResultReport(state, cfg.round_id, round_.session_id, cfg.dimension,
                              cfg.modulus_bits, round_.reached_unmask)
        if state == RoundState.ABORTED:
            return dataclasses.replace(report, abort_reason=round_.abort_reason)
        if state != RoundState.RELEASED:
            return report
        result = round_.result
        if result is None:
            raise StateError("the sum was already delivered")
        return dataclasses.replace(
            report, num_contributors=result.num_contributors, total=result.total,
            evidence=(ResultEvidence(tuple(result.survivors), tuple(result.signatures)),))

    async def outcome(self, round_id: bytes) -> RecordedOutcome:
        return self.rounds.outcome(round_id)

    @property
    def _wait_cap_s(self) -> float:
        return self.rounds.limits.max_wait_s

    async def _follow(self, round_id: bytes) -> _Follow:
        return _RoundFollow(self.rounds, round_id)


class _RoundFollow(_Follow):
    """A round of this aggregator, its changes told by the round itself
    (``Round.next_change``)."""

    def __init__(self, rounds: RoundRegistry, round_id: bytes) -> None:
        self._rounds = rounds
        self._round_id = round_id

    def now(self) -> RecordedOutcome:
        return self._rounds.outcome(self._round_id)

    async def changed(self, until: float) -> None:
        with contextlib.suppress(FedhhError):  # (no longer held: its tombstone stays)
            round_ = self._rounds.by_round(self._round_id)
            if round_.state == RoundState.RUNNING:
                await round_.next_change(until)

    def close(self) -> None:
        """(Its wait ends with the call.)"""


def _count_combiner(outcome: str) -> None:
    metrics.COMBINED_ROUNDS.labels(outcome).inc()


class ShardedRoundControl(ControlHandler[CombinedRound]):
    """The combiner's control calls, over its :class:`CombinerRegistry`."""

    sum_name = "total"

    def __init__(self, registry: CombinerRegistry) -> None:
        super().__init__(registry, _count_combiner)
        self.rounds = registry

    def _released(self, round_: CombinedRound) -> bool:
        # (a total released before a restart, still being rebuilt, is the coordinator's)
        return round_.state == RoundState.RELEASED or round_.settle_as_released()

    def _report(self, round_: CombinedRound, state: RoundState) -> ResultReport:
        report = ResultReport(state, round_.round_id, round_.session_id, round_.dimension,
                              round_.modulus_bits, round_.reached_unmask)
        if state == RoundState.RUNNING:
            return report
        report = dataclasses.replace(report, shards=tuple(round_.shards))
        if state == RoundState.ABORTED:
            return dataclasses.replace(report, abort_reason=round_.abort_reason)
        if round_.total is None:
            raise StateError("the total was already delivered")
        # Every released shard's evidence comes before a byte of the total (the coordinator
        # checks each against its shard's config and records the spend first).
        return dataclasses.replace(
            report, num_contributors=round_.contributors, total=round_.total,
            evidence=tuple(ResultEvidence(s.survivors, s.signatures, s.index)
                           for s in round_.shards if s.state == RoundState.RELEASED))

    async def outcome(self, round_id: bytes) -> RecordedOutcome:
        """The combiner's record, with each shard's outcome from its worker where the combiner
        does not know it (or, while the round runs, for its live stage); the round's stage is
        the earliest of its running shards', its counts (per stage, declined) their sums, a
        finished shard's as its worker still says them."""
        known = self.rounds.outcome(round_id)
        if known is None:
            return RecordedOutcome(OutcomeState.UNKNOWN)
        outcome, shards = known
        live = await self._shard_outcomes(round_id, outcome, shards)
        counted = await self._finished_counts(shards, live)
        return _merged(outcome, shards, live, counted)

    @property
    def _wait_cap_s(self) -> float:
        return self.rounds.limits.max_wait_s

    async def _follow(self, round_id: bytes) -> _Follow:
        follow = _ShardsFollow(self, round_id)
        await follow.start()
        return follow

    async def _finished_counts(self, shards: tuple[Shard, ...], live: list[RoundOutcome | None]
                               ) -> list[RoundOutcome | None]:
        """``live``, with the word of each shard's worker where ``live`` has none (a finished
        shard): the combiner keeps no counts of its own, and a too-few abort's reason names
        them once every shard has finished. Before, a finished sharded round's counts were
        empty."""
        async def ask(shard: Shard, seen: RoundOutcome | None) -> RoundOutcome | None:
            # (a running shard without a word was asked already: its worker did not answer)
            if seen is not None or shard.state == RoundState.RUNNING:
                return seen
            return await self._worker_outcome(shard)

        return list(await asyncio.gather(*(ask(s, seen)
                                           for s, seen in zip(shards, live, strict=True))))

    async def _shard_outcomes(self, round_id: bytes, outcome: RecordedOutcome,
                              shards: tuple[Shard, ...]) -> list[RoundOutcome | None]:
        """Each shard's outcome at its worker: asked of every shard of a running round (for the
        live stage), and of the shards whose outcome a restarted combiner no longer holds."""
        with contextlib.suppress(FedhhError):
            round_ = self.rounds.by_round(round_id)
            if outcome.state == OutcomeState.RUNNING:
                return await round_.live_outcomes()

        async def ask(shard: Shard) -> RoundOutcome | None:
            return await self._worker_outcome(shard) if shard.state == RoundState.RUNNING \
                else None

        return list(await asyncio.gather(*(ask(s) for s in shards)))

    async def _worker_outcome(self, shard: Shard) -> RoundOutcome | None:
        """The shard's outcome at its worker; None where it does not answer."""
        # (a restarted combiner's --worker list may have left a finished round's worker out)
        if shard.worker >= len(self.rounds.pool):
            return None
        with contextlib.suppress(grpc.aio.AioRpcError, FedhhError):
            return await self.rounds.pool[shard.worker].control.outcome(shard.round_id)
        return None


class _ShardsFollow(_Follow):
    """A sharded round followed through its workers: one long-poll per running shard, each
    with what its worker last said of it, merged as ``ShardedRoundControl.outcome`` merges
    them. A change at any worker wakes the watch (one call per change, not one per worker
    per second); a shard, or the round, that finished has the whole outcome asked afresh."""

    def __init__(self, control: ShardedRoundControl, round_id: bytes) -> None:
        self._control = control
        self._round_id = round_id
        self._round: CombinedRound | None = None
        self._outcome = RecordedOutcome(OutcomeState.UNKNOWN)
        self._shards: tuple[Shard, ...] = ()
        self._live: list[RoundOutcome | None] = []
        self._counted: list[RoundOutcome | None] = []
        self._polls: dict[int, asyncio.Task[RoundOutcome | None]] = {}

    async def start(self) -> None:
        """The round's outcome now, as ``ShardedRoundControl.outcome`` asks it."""
        self.close()
        self._round = None
        known = self._control.rounds.outcome(self._round_id)
        if known is not None and known[0].state == OutcomeState.RUNNING:
            with contextlib.suppress(FedhhError):
                self._round = self._control.rounds.by_round(self._round_id)
        if known is None or self._round is None:
            self._outcome = await self._control.outcome(self._round_id)
            return
        record, self._shards = known
        self._live = await self._round.live_outcomes()
        self._counted = await self._control._finished_counts(self._shards, self._live)
        self._outcome = _merged(record, self._shards, self._live, self._counted)

    def now(self) -> RecordedOutcome:
        return self._outcome

    async def changed(self, until: float) -> None:
        round_ = self._round
        if round_ is None:
            return
        for i, shard in enumerate(self._shards):
            said = self._live[i]
            # (a shard its worker says finished waits for the combiner to settle it)
            if i not in self._polls and shard.state == RoundState.RUNNING and (
                    said is None or said.state == "running"):
                self._polls[i] = asyncio.create_task(self._next_word(round_, shard, said, until))
        finished = asyncio.ensure_future(round_.finished.wait())
        try:
            await asyncio.wait([*self._polls.values(), finished],
                               timeout=max(0.0, until - asyncio.get_running_loop().time()),
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            finished.cancel()
        for i, poll in list(self._polls.items()):
            if poll.done():
                del self._polls[i]
                self._live[i] = poll.result()
        known = self._control.rounds.outcome(self._round_id)
        if known is None or known[0].state != OutcomeState.RUNNING or any(
                s.state != RoundState.RUNNING and said is not None
                for s, said in zip(self._shards, self._live, strict=True)):
            await self.start()  # (a shard or the round finished: asked afresh)
            return
        self._outcome = _merged(known[0], self._shards, self._live,
                                [said if said is not None else counted for said, counted
                                 in zip(self._live, self._counted, strict=True)])

    @staticmethod
    async def _next_word(round_: CombinedRound, shard: Shard, said: RoundOutcome | None,
                         until: float) -> RoundOutcome | None:
        """The shard's worker's word once it is no longer ``said`` (or at ``until``); ``said``
        while the worker does not answer. A worker that answers at once (before the
        long-poll) or not at all is asked again after ``UNWATCHED_PACE_S``."""
        loop = asyncio.get_running_loop()
        seen = None if said is None else OutcomeView.of(said)
        word = await round_.live_outcome(shard, seen, max(0.0, until - loop.time()))
        if word is None or (not word.watched and OutcomeView.of(word) == seen):
            await asyncio.sleep(max(0.0, min(UNWATCHED_PACE_S, until - loop.time())))
        return said if word is None else word

    def close(self) -> None:
        for poll in self._polls.values():
            poll.cancel()
        self._polls = {}


def _merged(outcome: RecordedOutcome, shards: tuple[Shard, ...],
            live: list[RoundOutcome | None], counted: list[RoundOutcome | None]
            ) -> RecordedOutcome:
    """A sharded round's outcome: the combiner's record ``outcome``, its stage the earliest of
    its running shards' (as their workers said, ``live``), its counts (per stage, declined)
    their sums as each shard's worker said them (``counted``)."""
    running: list[Stage] = []
    reached_unmask = outcome.reached_unmask
    for seen in live:
        if seen is None:
            continue
        if seen.state == "running" and seen.stage is not None:
            running.append(seen.stage)
        reached_unmask = reached_unmask or seen.reached_unmask
    counts: dict[Stage, int] = {}
    for seen in counted:
        for stage, n in seen.stage_devices if seen is not None else ():
            counts[stage] = counts.get(stage, 0) + n
    said = [s.declined for s in counted if s is not None and s.declined is not None]
    return dataclasses.replace(
        outcome, reached_unmask=reached_unmask,
        stage=min(running) if outcome.state == OutcomeState.RUNNING and running else None,
        stage_devices=tuple(sorted(counts.items())), declined=sum(said) if said else None,
        shards=tuple(_shard_outcome(s, seen, said_after)
                     for s, seen, said_after in zip(shards, live, counted, strict=True)))


def _shard_outcome(shard: Shard, seen: RoundOutcome | None,
                   counted: RoundOutcome | None) -> ShardOutcome:
    """A shard's outcome: the worker's word when asked, else the combiner's own record with the
    count of declines its worker still says (``counted``)."""
    if seen is not None:
        return ShardOutcome(shard.round_id, shard.worker, OutcomeState(seen.state), seen.stage,
                            seen.reached_unmask or shard.reached_unmask, seen.abort_reason,
                            seen.num_contributors, seen.declined)
    state = {RoundState.RUNNING: OutcomeState.UNKNOWN, RoundState.RELEASED: OutcomeState.RELEASED,
             RoundState.ABORTED: OutcomeState.ABORTED}[shard.state]
    return ShardOutcome(shard.round_id, shard.worker, state, None, shard.reached_unmask,
                        shard.reason, shard.contributors,
                        counted.declined if counted is not None else None)
