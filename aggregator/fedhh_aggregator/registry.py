"""The open rounds of the service, by round id and by session id, within its limits.

Opening checks the coordinator's signature and the config before anything is allocated;
forgetting a round (its outcome was delivered, cancelled after release, expired, or the service
stops) drops everything it holds and leaves a tombstone with its final state, so its round id
cannot be reopened and late device calls are told the round has finished.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from fedhh.errors import AuthenticationError, ConfigError, ConflictError, NotFoundError, StateError
from fedhh.secagg import ProtocolViolation, RoundConfig, SecAggServer, SignedConfig, Violation
from fedhh.secagg.primitives import ed25519_verify
from fedhh_aggregator import metrics
from fedhh_aggregator.errors import CapacityError
from fedhh_aggregator.rounds import Limits, Round, RoundState, round_label

__all__ = ["RoundRegistry"]

log = logging.getLogger(__name__)
_TOMBSTONES = 4096


class RoundRegistry:
    """The open rounds, by round id and by session id, within the service's limits."""

    def __init__(self, coordinator_public: bytes, limits: Limits | None = None) -> None:
        self.coordinator_public = coordinator_public
        self.limits = limits or Limits()
        self.uploads = asyncio.Semaphore(self.limits.max_uploads)
        self._by_round: dict[bytes, Round] = {}
        self._by_session: dict[bytes, Round] = {}
        self._tombstones: OrderedDict[bytes, tuple[RoundState, str]] = OrderedDict()
        self._gone_sessions: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_round)

    def open(self, payload: bytes, signature: bytes) -> tuple[Round, bool]:
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
        round_ = Round(server, signed, self.limits, self._expired)
        self._by_round[config.round_id] = round_
        self._by_session[round_.session_id] = round_
        round_.start()
        metrics.ROUNDS_OPENED.inc()
        metrics.ROUNDS_OPEN.set(len(self._by_round))
        log.info("round opened", extra={
            "round_id": round_label(config.round_id), "session": round_.session_id.hex()[:16],
            "devices": config.num_devices, "dimension": config.dimension, "k": config.k,
            "t": config.t, "n_min": config.n_min, "consistency_check": config.consistency_check})
        return round_, True

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
        if round_id in self._tombstones:
            state, why = self._tombstones[round_id]
            raise StateError(f"round {round_label(round_id)!r} ({state.value}) is gone: {why}")
        raise NotFoundError(f"no round {round_label(round_id)!r}")

    def final_state(self, round_id: bytes) -> RoundState | None:
        entry = self._tombstones.get(round_id)
        return entry[0] if entry is not None else None

    def forget(self, round_: Round, why: str) -> None:
        """Drop a round and everything it holds; remember only its final state."""
        if self._by_round.get(round_.round_id) is not round_:
            return
        del self._by_round[round_.round_id]
        self._by_session.pop(round_.session_id, None)
        state = round_.state if round_.state != RoundState.RUNNING else RoundState.ABORTED
        round_.stop()
        self._tombstones[round_.round_id] = (state, why)
        self._gone_sessions[round_.session_id] = None
        while len(self._tombstones) > _TOMBSTONES:
            self._tombstones.popitem(last=False)
        while len(self._gone_sessions) > _TOMBSTONES:
            self._gone_sessions.popitem(last=False)
        metrics.ROUNDS_OPEN.set(len(self._by_round))

    def _expired(self, round_: Round) -> None:
        self.forget(round_, "expired before its outcome was fetched")

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
        """Stop every round (service shutdown)."""
        for round_ in list(self._by_round.values()):
            self.forget(round_, "the aggregator shut down")
