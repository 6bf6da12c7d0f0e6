"""The rounds of the service: the open ones, and what became of the finished ones.

Opening checks the coordinator's signature and the config before anything is allocated. A
finished round is kept until its outcome was delivered (or cancelled, or expired, or the
service stops); then everything it holds is dropped and a tombstone remains with its outcome
(released or aborted, the reason, whether unmasking began, the contributor count, whether the
sum was delivered). Tombstones answer GetOutcome, refuse a reopening of the round id, and tell
late device calls that the round has finished. They are bounded in number
(``Limits.max_tombstones``, the oldest go first) and in age (``Limits.tombstone_ttl_s``).

With a :class:`~fedhh_aggregator.journal.Journal` (``--state-dir``) every opening, the start of
unmasking and every outcome is on disk before it takes effect, and a restarted service rebuilds
its tombstones from it: a round that was running when the service died is reported aborted
("aggregator_restarted"), with whether it had reached unmasking; a released sum that was not
delivered is reported released and no longer available.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

from fedhh.errors import AuthenticationError, ConfigError, ConflictError, NotFoundError, StateError
from fedhh.secagg import (
    ProtocolViolation,
    RoundConfig,
    SecAggServer,
    SignedConfig,
    Stage,
    Violation,
)
from fedhh.secagg.primitives import ed25519_verify
from fedhh_aggregator import metrics
from fedhh_aggregator.errors import CapacityError, JournalError
from fedhh_aggregator.journal import Journal, RoundRecord
from fedhh_aggregator.rounds import STOPPED, Limits, Round, RoundHooks, RoundState, round_label

__all__ = ["RESTARTED", "OutcomeState", "RecordedOutcome", "RoundRegistry"]

log = logging.getLogger(__name__)
RESTARTED = "aggregator_restarted"  # abort reason of a round lost in a restart


class OutcomeState(StrEnum):
    UNKNOWN = "unknown"
    RUNNING = "running"
    ABORTED = "aborted"
    RELEASED = "released"


@dataclass(frozen=True)
class RecordedOutcome:
    """What GetOutcome answers about a round."""

    state: OutcomeState
    session_id: bytes = b""
    stage: Stage | None = None  # RUNNING: the open stage
    reached_unmask: bool = False
    abort_reason: str = ""
    delivered: bool = False
    sum_available: bool = False
    num_contributors: int = 0
    stage_devices: tuple[tuple[Stage, int], ...] = ()  # accepted per closed stage


@dataclass(frozen=True)
class _Tombstone:
    session_id: bytes
    state: RoundState  # RELEASED or ABORTED
    abort_reason: str
    reached_unmask: bool
    num_contributors: int
    delivered: bool
    why: str  # why the round was dropped, for "gone" errors
    at: float  # Unix time it was dropped
    stage_devices: tuple[tuple[Stage, int], ...] = ()  # in memory only: not journaled

    def outcome(self) -> RecordedOutcome:
        state = OutcomeState.RELEASED if self.state == RoundState.RELEASED else \
            OutcomeState.ABORTED
        return RecordedOutcome(state, self.session_id, None, self.reached_unmask, self.abort_reason,
                       self.delivered, False, self.num_contributors, self.stage_devices)


def _tombstone_of(record: RoundRecord) -> _Tombstone:
    """The tombstone of a journaled round that has an outcome."""
    if record.state == RoundState.RELEASED.value:
        why = "delivered" if record.delivered else "its sum was lost in an aggregator restart"
        return _Tombstone(record.session_id, RoundState.RELEASED, "", True,
                          record.contributors, record.delivered, why, record.finished_at)
    why = "lost in an aggregator restart" if record.reason == RESTARTED else "aborted"
    return _Tombstone(record.session_id, RoundState.ABORTED, record.reason,
                      record.unmask_started, 0, False, why, record.finished_at)


class RoundRegistry:
    """The open rounds, by round id and by session id, within the service's limits, and the
    tombstones of finished ones."""

    def __init__(self, coordinator_public: bytes, limits: Limits | None = None,
                 journal: Journal | None = None) -> None:
        self.coordinator_public = coordinator_public
        self.limits = limits or Limits()
        self.journal = journal
        self.uploads = asyncio.Semaphore(self.limits.max_uploads)
        self._by_round: dict[bytes, Round] = {}
        self._by_session: dict[bytes, Round] = {}
        self._tombstones: OrderedDict[bytes, _Tombstone] = OrderedDict()
        self._gone_sessions: dict[bytes, bytes] = {}  # session id -> round id, of tombstones
        self._hooks = RoundHooks(self._before_unmask, self._finished, self._expired)

    def __len__(self) -> int:
        return len(self._by_round)

    @property
    def durable(self) -> bool:
        """True iff outcomes survive a restart (a journal is kept)."""
        return self.journal is not None

    def restore(self) -> None:
        """Rebuild the tombstones from the journal (at startup, before serving)."""
        if self.journal is None:
            return
        records = self.journal.load()
        for record in sorted(records.values(), key=lambda r: r.finished_at or r.opened_at):
            if not record.state:  # it was running when the service stopped
                record = self.journal.settle(record.round_id, RESTARTED)
                log.warning("round lost in a restart", extra={
                    "round_id": round_label(record.round_id),
                    "reached_unmask": record.unmask_started})
            self._bury(record.round_id, _tombstone_of(record), journal=False)
        self._prune(time.time())
        self.journal.rewrite()  # only what is kept, without an interrupted last line
        log.info("outcome journal loaded", extra={"path": str(self.journal.path),
                                                  "rounds": len(self._tombstones)})

    # -- opening -------------------------------------------------------------------------------

    async def open(self, payload: bytes, signature: bytes) -> tuple[Round, bool]:
        """Open a round from its signed config; returns (round, created)."""
        if not ed25519_verify(self.coordinator_public, signature, payload):
            raise AuthenticationError("the round config is not signed by the coordinator")
        config = RoundConfig.from_bytes(payload)
        signed = SignedConfig(payload, signature)
        existing = self._by_round.get(config.round_id)
        if existing is not None:
            if existing.signed == signed:
                return existing, False
            raise ConflictError(f"round {round_label(config.round_id)!r} is already open with "
                                "another config")
        self._prune(time.time())
        if config.round_id in self._tombstones:
            raise ConflictError(f"round {round_label(config.round_id)!r} has already finished")
        if not config.device_auth:
            raise ConfigError("the aggregator admits only authenticated devices: the round "
                              "config needs device_auth")
        now_ms = time.time() * 1000
        last = config.deadlines.unmask
        if last <= now_ms:
            raise ConfigError(f"the round's last deadline ({last} ms) has already passed")
        if last > now_ms + self.limits.max_round_s * 1000:
            raise ConfigError(f"the round's last deadline is more than {self.limits.max_round_s}"
                              " s ahead")
        if len(self._by_round) >= self.limits.max_rounds:
            raise CapacityError(f"the aggregator already holds {self.limits.max_rounds} rounds")
        server = SecAggServer(signed, self.coordinator_public)
        round_ = Round(server, signed, self.limits, self._hooks)
        self._by_round[config.round_id] = round_
        self._by_session[round_.session_id] = round_
        if self.journal is not None:
            try:
                await self.journal.opened(config.round_id, round_.session_id)
            except OSError as error:
                del self._by_round[config.round_id]
                del self._by_session[round_.session_id]
                self.journal.records.pop(config.round_id, None)
                raise JournalError(f"the aggregator cannot record the round: {error}") from None
        round_.start()
        metrics.ROUNDS_OPENED.inc()
        metrics.ROUNDS_OPEN.set(len(self._by_round))
        log.info("round opened", extra={
            "round_id": round_label(config.round_id), "session": round_.session_id.hex()[:16],
            "devices": config.num_devices, "dimension": config.dimension, "k": config.k,
            "t": config.t, "n_min": config.n_min, "consistency_check": config.consistency_check})
        return round_, True

    # -- lookups -------------------------------------------------------------------------------

    def by_session(self, session_id: bytes) -> Round:
        if len(session_id) != 32:
            raise ProtocolViolation(Violation.MALFORMED,
                                    f"session_id must be 32 bytes, got {len(session_id)}")
        round_ = self._by_session.get(session_id)
        if round_ is None:
            if session_id in self._gone_sessions:
                raise StateError("the round has finished")
            raise NotFoundError("no open round has this session id")
        return round_

    def by_round(self, round_id: bytes) -> Round:
        round_ = self._by_round.get(round_id)
        if round_ is not None:
            return round_
        tombstone = self._tombstones.get(round_id)
        if tombstone is not None:
            raise StateError(f"round {round_label(round_id)!r} ({tombstone.state.value}) is "
                             f"gone: {tombstone.why}")
        raise NotFoundError(f"no round {round_label(round_id)!r}")

    def final_state(self, round_id: bytes) -> RoundState | None:
        tombstone = self._tombstones.get(round_id)
        return tombstone.state if tombstone is not None else None

    def outcome(self, round_id: bytes) -> RecordedOutcome:
        """What became of the round, as far as this aggregator knows."""
        round_ = self._by_round.get(round_id)
        if round_ is not None:
            counts = round_.stage_devices
            if round_.state == RoundState.RUNNING:
                return RecordedOutcome(OutcomeState.RUNNING, round_.session_id, round_.stage,
                               round_.reached_unmask, stage_devices=counts)
            if round_.state == RoundState.ABORTED:
                return RecordedOutcome(OutcomeState.ABORTED, round_.session_id, None,
                               round_.reached_unmask, round_.abort_reason, stage_devices=counts)
            result = round_.result
            return RecordedOutcome(OutcomeState.RELEASED, round_.session_id, None, True, "", False,
                           result is not None,
                           result.num_contributors if result is not None else 0, counts)
        self._prune(time.time())
        tombstone = self._tombstones.get(round_id)
        if tombstone is None:
            return RecordedOutcome(OutcomeState.UNKNOWN)
        return tombstone.outcome()

    # -- forgetting ----------------------------------------------------------------------------

    def forget(self, round_: Round, why: str, *, delivered: bool = False,
               reason: str | None = None) -> None:
        """Drop a round and everything it holds; keep its outcome as a tombstone. A running
        round aborts first (with ``reason``, else "cancelled")."""
        if self._by_round.get(round_.round_id) is not round_:
            return
        del self._by_round[round_.round_id]
        self._by_session.pop(round_.session_id, None)
        contributors = round_.result.num_contributors if round_.result is not None else 0
        if reason is None:
            round_.stop()
        else:
            round_.stop(reason)
        if delivered and self.journal is not None:
            self.journal.delivered(round_.round_id)
        self._bury(round_.round_id, _Tombstone(
            round_.session_id, round_.state, round_.abort_reason, round_.reached_unmask,
            contributors, delivered, why, time.time(), round_.stage_devices))
        metrics.ROUNDS_OPEN.set(len(self._by_round))

    def _bury(self, round_id: bytes, tombstone: _Tombstone, journal: bool = True) -> None:
        self._tombstones.pop(round_id, None)
        self._tombstones[round_id] = tombstone
        self._gone_sessions[tombstone.session_id] = round_id
        if journal:
            self._prune(time.time())

    def _prune(self, now: float) -> None:
        """Drop tombstones beyond the count and age bounds (oldest first)."""
        oldest = now - self.limits.tombstone_ttl_s
        dropped = False
        while self._tombstones:
            round_id, tombstone = next(iter(self._tombstones.items()))
            if len(self._tombstones) <= self.limits.max_tombstones and tombstone.at >= oldest:
                break
            del self._tombstones[round_id]
            self._gone_sessions.pop(tombstone.session_id, None)
            dropped = True
        if self.journal is not None and (dropped or self.journal.records.keys()
                                         - self._by_round.keys() - self._tombstones.keys()):
            self.journal.keep_only([*self._by_round, *self._tombstones])

    # -- round hooks ---------------------------------------------------------------------------

    async def _before_unmask(self, round_: Round) -> None:
        if self.journal is not None:
            await self.journal.unmask_started(round_.round_id)

    def _finished(self, round_: Round) -> None:
        if self.journal is None:
            return
        contributors = round_.result.num_contributors if round_.result is not None else 0
        self.journal.finished(round_.round_id, round_.state.value, round_.abort_reason,
                              round_.reached_unmask, contributors)

    def _expired(self, round_: Round) -> None:
        self.forget(round_, "expired before its outcome was fetched")

    # -- control -------------------------------------------------------------------------------

    async def cancel(self, round_id: bytes) -> RoundState:
        """Abort a running round, or drop a finished one's sum; idempotent."""
        round_ = self._by_round.get(round_id)
        if round_ is None:
            state = self.final_state(round_id)
            if state is None:
                raise NotFoundError(f"no round {round_label(round_id)!r}")
            return state
        state = await round_.cancel()
        if state == RoundState.RELEASED:
            self.forget(round_, "cancelled by the coordinator; the sum was dropped")
        log.info("round cancelled", extra={"round_id": round_label(round_id),
                                           "state": state.value})
        return state

    def close(self) -> None:
        """Stop every round (service shutdown) and finish the journal's writes."""
        for round_ in list(self._by_round.values()):
            self.forget(round_, "the aggregator shut down", reason=STOPPED)
        if self.journal is not None:
            self.journal.close()
