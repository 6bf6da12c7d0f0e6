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

from fedhh.errors import AuthenticationError, ConfigError, NotFoundError, StateError
from fedhh.rpc.request_waits import RequestWaits
from fedhh.secagg import ProtocolViolation, RoundConfig, SecAggServer, SignedConfig, Violation
from fedhh.secagg.primitives import ed25519_verify
from fedhh_aggregator import metrics
from fedhh_aggregator.errors import CapacityError, JournalError
from fedhh_aggregator.journal import Journal, RoundRecord
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome, RoundBook, Tombstone
from fedhh_aggregator.rounds import (
    STOPPED,
    Limits,
    Round,
    RoundHooks,
    RoundState,
    round_label,
)

__all__ = ["RESTARTED", "RoundRegistry", "recorded_outcome"]

log = logging.getLogger(__name__)
RESTARTED = "aggregator_restarted"  # abort reason of a round lost in a restart


def recorded_outcome(record: RoundRecord, sum_name: str, restart: str
                     ) -> tuple[RecordedOutcome, str]:
    """A journaled round's outcome, once it has one, and why its tombstone stands (an
    aggregator's and a combiner's alike: ``sum_name`` what a released round holds, ``restart``
    the restart that loses it)."""
    if record.state == RoundState.RELEASED.value:
        why = "delivered" if record.delivered else "dropped unfetched" if record.dropped else \
            f"its {sum_name} was lost in {restart}"
        return RecordedOutcome(OutcomeState.RELEASED, record.session_id, None, True, "",
                               record.delivered, False, record.contributors), why
    why = f"lost in {restart}" if record.reason == RESTARTED else "aborted"
    return RecordedOutcome(OutcomeState.ABORTED, record.session_id, None,
                           record.unmask_started, record.reason), why


class RoundRegistry(RoundBook[Round, Tombstone]):
    """The open rounds, by round id and by session id, within the service's limits, and the
    tombstones of finished ones."""

    def __init__(self, coordinator_public: bytes, limits: Limits | None = None,
                 journal: Journal | None = None) -> None:
        self.coordinator_public = coordinator_public
        self.limits = limits or Limits()
        self._gone_sessions: dict[bytes, bytes] = {}  # session id -> round id, of tombstones
        super().__init__(journal, self.limits.max_tombstones, self.limits.tombstone_ttl_s,
                         lambda t: self._gone_sessions.pop(t.outcome.session_id, None))
        self.uploads = asyncio.Semaphore(self.limits.max_uploads)
        # (session_stream.run_session holds a place from a stream's start to its open)
        self.unopened = RequestWaits("session", self.limits.max_unopened_sessions,
                                     self.limits.upload_idle_s)
        self._by_session: dict[bytes, Round] = {}
        self._hooks = RoundHooks(self._before_unmask, self._finished, self._expired)

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
            self._bury(record.round_id, Tombstone(*recorded_outcome(
                record, self.sum_name, "an aggregator restart"), record.finished_at), prune=False)
        self._tombstones.prune()
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
        existing = self.retried_open(config.round_id, lambda round_: round_.signed == signed,
                                     "config", [(config, "the round")], self.limits.max_round_s)
        if existing is not None:
            return existing, False
        if not config.device_auth:
            raise ConfigError("the aggregator admits only authenticated devices: the round "
                              "config needs device_auth")
        if len(self._rounds) >= self.limits.max_rounds:
            raise CapacityError(f"the aggregator already holds {self.limits.max_rounds} rounds")
        server = SecAggServer(signed, self.coordinator_public)
        round_ = Round(server, signed, self.limits, self._hooks)
        self._rounds[config.round_id] = round_
        self._by_session[round_.session_id] = round_
        if self.journal is not None:
            try:
                await self.journal.opened(config.round_id, round_.session_id)
            except OSError as error:
                del self._rounds[config.round_id]
                del self._by_session[round_.session_id]
                self.journal.records.pop(config.round_id, None)
                raise JournalError(f"the aggregator cannot record the round: {error}") from None
        round_.start()
        metrics.ROUNDS_OPENED.inc()
        metrics.ROUNDS_OPEN.set(len(self._rounds))
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

    def outcome(self, round_id: bytes) -> RecordedOutcome:
        """What became of the round, as far as this aggregator knows."""
        round_ = self._rounds.get(round_id)
        if round_ is not None:
            counts = round_.stage_devices
            if round_.state == RoundState.RUNNING:
                return RecordedOutcome(OutcomeState.RUNNING, round_.session_id, round_.stage,
                               round_.reached_unmask, stage_devices=counts,
                               declined=round_.declined)
            if round_.state == RoundState.ABORTED:
                return RecordedOutcome(OutcomeState.ABORTED, round_.session_id, None,
                               round_.reached_unmask, round_.abort_reason, stage_devices=counts,
                               declined=round_.declined)
            result = round_.result
            return RecordedOutcome(OutcomeState.RELEASED, round_.session_id, None, True, "", False,
                           result is not None,
                           result.num_contributors if result is not None else 0, counts,
                           declined=round_.declined)
        self._tombstones.prune()
        tombstone = self._tombstones.get(round_id)
        return RecordedOutcome(OutcomeState.UNKNOWN) if tombstone is None else tombstone.outcome

    # -- forgetting ----------------------------------------------------------------------------

    def forget(self, round_: Round, why: str, *, delivered: bool = False,
               reason: str | None = None) -> None:
        """Drop a round and everything it holds; keep its outcome as a tombstone. A running
        round aborts first (with ``reason``, else "cancelled")."""
        if self._rounds.get(round_.round_id) is not round_:
            return
        del self._rounds[round_.round_id]
        self._by_session.pop(round_.session_id, None)
        contributors = round_.result.num_contributors if round_.result is not None else 0
        if reason is None:
            round_.stop()
        else:
            round_.stop(reason)
        if delivered and self.journal is not None:
            self.journal.delivered(round_.round_id)
        state = OutcomeState.RELEASED if round_.state == RoundState.RELEASED else \
            OutcomeState.ABORTED
        self._bury(round_.round_id, Tombstone(RecordedOutcome(
            state, round_.session_id, None, round_.reached_unmask, round_.abort_reason, delivered,
            False, contributors, round_.stage_devices, declined=round_.declined), why,
            time.time()))
        metrics.ROUNDS_OPEN.set(len(self._rounds))

    def _bury(self, round_id: bytes, tombstone: Tombstone, *, prune: bool = True) -> None:
        self._gone_sessions[tombstone.outcome.session_id] = round_id
        self._tombstones.bury(round_id, tombstone, prune=prune)

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

    # -- control -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every round (service shutdown) and finish the journal's writes."""
        for round_ in list(self._rounds.values()):
            self.forget(round_, "the aggregator shut down", reason=STOPPED)
        if self.journal is not None:
            self.journal.close()
