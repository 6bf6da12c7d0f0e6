"""One open round: a ``SecAggServer`` driven on the event loop (the registry holds them).

- Calls into a round's state machine are serialised by the round's asyncio lock; closing a stage
  (the unmasking work is the close of UNMASK) runs in a worker thread under that lock, so other
  rounds and health checks stay responsive.
- Each round has one driver task: it closes the open stage at the config's deadline (Unix ms),
  or as soon as the state machine says waiting cannot change the outcome
  (``SecAggServer.can_close_early``: every expected device answered, or every secret has t
  shares), or, if the service is configured with ``quiet_close_s``, once n_min devices answered
  and then none for that long (every stage but UNMASK).
- Devices long-poll for their next request (:meth:`Round.await_request`); the coordinator waits
  for the outcome (:meth:`Round.wait_finished`).
- A masked vector reaches :meth:`Round.submit` only when complete; the state machine adds it to
  the running sum and it is dropped.
- A released sum is kept until the coordinator fetched it, or until ``result_ttl_s`` after the
  round finished (then the driver hands the round to ``on_expire``, and the registry forgets it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from fedhh.errors import AuthenticationError, ConfigError, StateError
from fedhh.secagg import (
    AbortReason,
    AggregateResult,
    DeviceMessage,
    ProtocolViolation,
    RoundConfig,
    SecAggAbort,
    SecAggServer,
    ServerMessage,
    SignedConfig,
    Stage,
    Violation,
    verify_admission,
)
from fedhh.secagg.config import Admission
from fedhh_aggregator import metrics
from fedhh_aggregator.errors import RoundAbortedError

log = logging.getLogger(__name__)

__all__ = ["AwaitOutcome", "AwaitStatus", "Limits", "Round", "RoundState", "round_label"]

# Rejections that are about timing or membership, not about the message: FAILED_PRECONDITION.
_NOT_NOW = frozenset({Violation.EARLY, Violation.LATE, Violation.NOT_IN_ROUND})


class RoundState(StrEnum):
    RUNNING = "running"
    RELEASED = "released"
    ABORTED = "aborted"


class AwaitStatus(StrEnum):
    READY = "ready"
    PENDING = "pending"
    NOT_SELECTED = "not_selected"
    CLOSED = "closed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class AwaitOutcome:
    status: AwaitStatus
    request: ServerMessage | None = None
    abort_reason: str = ""


@dataclass(frozen=True)
class Limits:
    """Resource bounds of the service (the CLI exposes each)."""

    max_rounds: int = 16  # rounds held at once (running, or finished and unfetched)
    max_wait_s: float = 30.0  # cap of any long-poll
    result_ttl_s: float = 600.0  # a finished round's outcome is kept this long for the fetch
    max_round_s: float = 3600.0  # the last deadline of a config may be at most this far ahead
    max_uploads: int = 32  # masked vectors buffered at once (each is dimension * 2 or 4 bytes)
    # Calls that reached the server but wait for its event loop to start them. gRPC core sheds
    # calls beyond this backlog (at random, all of them at twice it) with a bare CANCELLED
    # before any handler runs; every device of a round calls at about the same moment when a
    # stage opens, so keep it well above twice the devices of the rounds open at once.
    max_pending_calls: int = 16_384
    # Close a stage (not UNMASK, which closes once every secret can be rebuilt) before its
    # deadline once at least n_min devices answered it and none for this long (0: off).
    # Devices that drop out are silent, so without it every stage that lost one waits for its
    # deadline; with it the round moves at the pace of the live devices, and a device slower
    # than this after the others counts as dropped.
    quiet_close_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("max_rounds", "max_uploads", "max_pending_calls"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not self.quiet_close_s >= 0:
            raise ConfigError(f"quiet_close_s must be >= 0, got {self.quiet_close_s!r}")
        if self.max_pending_calls > 1 << 30:  # gRPC takes twice it as a C int
            raise ConfigError(f"max_pending_calls must be at most {1 << 30}")
        for name in ("max_wait_s", "result_ttl_s", "max_round_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)!r}")


def _deadline_ms(config: RoundConfig, stage: Stage) -> int:
    d = config.deadlines
    return {Stage.ADVERTISE_KEYS: d.advertise_keys, Stage.SHARE_KEYS: d.share_keys,
            Stage.MASKED_INPUT: d.masked_input, Stage.CONSISTENCY_CHECK: d.consistency_check,
            Stage.UNMASK: d.unmask}.get(stage, d.unmask)


def round_label(round_id: bytes) -> str:
    """A round id for logs (ids are coordinator-chosen bytes, usually text)."""
    return round_id.decode("utf-8", errors="backslashreplace")


class Round:
    """One open round: its state machine, lock, driver task and waiters."""

    def __init__(self, server: SecAggServer, signed: SignedConfig, limits: Limits,
                 on_expire: Callable[[Round], None]) -> None:
        self.server = server
        self.signed = signed
        self.config = server.config
        self.session_id = server.session_id
        self.round_id = self.config.round_id
        self.limits = limits
        self.lock = asyncio.Lock()
        self.stage = server.stage  # mirror, read by long-polls while a close runs in a thread
        self.requests: dict[int, ServerMessage] = {}  # the open stage's requests
        self.state = RoundState.RUNNING
        self.abort_reason = ""
        self.result: AggregateResult | None = None
        self.finished = asyncio.Event()
        self._changed = asyncio.Event()  # replaced on every change; set to wake long-polls
        self._wake = asyncio.Event()  # the open stage may close early
        self._admitted: dict[int, Admission] = {}
        self._on_expire = on_expire
        self._stage_opened = time.monotonic()
        self._last_accepted = self._stage_opened  # the open stage's latest accepted message
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._drive(), name=f"round {round_label(self.round_id)}")

    @property
    def driver(self) -> asyncio.Task[None] | None:
        """The task that closes the stages and, after the round, expires its outcome."""
        return self._task

    def stop(self) -> None:
        """Stop the driver and drop everything (the registry forgot the round)."""
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        if self.state == RoundState.RUNNING:
            if not self.lock.locked():
                self.server.abort()  # (a close running in a thread is simply abandoned)
            self.state = RoundState.ABORTED
            self.abort_reason = AbortReason.CANCELLED.value
            self.finished.set()
        self.result = None
        self.server.result = None
        self.requests = {}
        self._notify()  # long-polls answer now

    # -- authentication --------------------------------------------------------------------------

    def admitted(self, admission: Admission) -> bool:
        """True iff ``admission`` proves its keys are the cohort member's under the signed
        config's identity root (a Merkle proof: a few hashes)."""
        if self._admitted.get(admission.device_id) == admission:
            return True
        if not verify_admission(admission, self.config):
            return False
        self._admitted[admission.device_id] = admission
        return True

    # -- device side -----------------------------------------------------------------------------

    async def submit(self, stage: Stage, message: DeviceMessage) -> bool:
        """Hand one authenticated message to the state machine (True: accepted; False:
        identical duplicate). Raises ProtocolViolation, StateError, AuthenticationError or
        RoundAbortedError without changing anything."""
        handlers: dict[Stage, Callable[..., bool]] = {
            Stage.ADVERTISE_KEYS: self.server.handle_advertise_keys,
            Stage.SHARE_KEYS: self.server.handle_share_keys,
            Stage.MASKED_INPUT: self.server.handle_masked_input,
            Stage.CONSISTENCY_CHECK: self.server.handle_consistency_check,
            Stage.UNMASK: self.server.handle_unmask,
        }
        async with self.lock:
            try:
                accepted = handlers[stage](message)
            except SecAggAbort as exc:
                raise RoundAbortedError(f"round aborted ({exc.reason.value})") from None
            except ProtocolViolation as exc:
                metrics.MESSAGES.labels(stage.name, exc.reason.value).inc()
                if exc.reason == Violation.BAD_SIGNATURE:
                    raise AuthenticationError(str(exc)) from None
                if exc.reason in _NOT_NOW:
                    raise StateError(str(exc)) from None
                raise
            metrics.MESSAGES.labels(stage.name, "accepted" if accepted else "duplicate").inc()
            if accepted:
                self._last_accepted = time.monotonic()
                if self.server.can_close_early():
                    self._wake.set()
            return accepted

    async def await_request(self, device_id: int, stage: Stage, wait_s: float) -> AwaitOutcome:
        """This device's request for ``stage``, waiting up to ``wait_s`` for the stage to open."""
        if stage not in (Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK,
                         Stage.UNMASK):
            raise ProtocolViolation(Violation.MALFORMED, f"no requests are sent for {stage.name}")
        if stage == Stage.CONSISTENCY_CHECK and not self.config.consistency_check:
            raise ProtocolViolation(Violation.MALFORMED, "this round has no consistency check")
        loop = asyncio.get_running_loop()
        until = loop.time() + max(0.0, min(wait_s, self.limits.max_wait_s))
        while True:
            if self.state == RoundState.ABORTED:
                return AwaitOutcome(AwaitStatus.ABORTED, abort_reason=self.abort_reason)
            if self.stage == stage:
                request = self.requests.get(device_id)
                if request is None:
                    return AwaitOutcome(AwaitStatus.NOT_SELECTED)
                return AwaitOutcome(AwaitStatus.READY, request)
            if self.stage > stage:
                return AwaitOutcome(AwaitStatus.CLOSED)
            remaining = until - loop.time()
            if remaining <= 0:
                return AwaitOutcome(AwaitStatus.PENDING)
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)

    def stage_after(self, stage: Stage) -> Stage:
        """The stage whose request follows a submission for ``stage`` (not UNMASK, the last)."""
        if stage == Stage.MASKED_INPUT:
            return Stage.CONSISTENCY_CHECK if self.config.consistency_check else Stage.UNMASK
        if stage in (Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.CONSISTENCY_CHECK):
            return Stage(stage + 1)
        raise ProtocolViolation(Violation.MALFORMED, f"no request follows {stage.name}")

    def upload_deadline(self) -> float:
        """Seconds until the masked-input stage's deadline (uploads must finish by then)."""
        return _deadline_ms(self.config, Stage.MASKED_INPUT) / 1000 - time.time()

    # -- coordinator side -------------------------------------------------------------------------

    async def wait_finished(self, wait_s: float) -> RoundState:
        if not self.finished.is_set() and wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.finished.wait(), min(wait_s, self.limits.max_wait_s))
        return self.state

    async def cancel(self) -> RoundState:
        """Abort a running round (releases nothing); returns the state afterwards."""
        async with self.lock:
            if self.state == RoundState.RUNNING:
                self.server.abort()
                self._finish_aborted(self.server.aborted)
        return self.state

    # -- the driver ----------------------------------------------------------------------------

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _drive(self) -> None:
        try:
            while not self.finished.is_set():
                await self._until_closable()
                try:
                    await self._close()
                except Exception:  # a bug: abort the round (release nothing), keep serving
                    log.exception("closing a stage failed",
                                  extra={"round_id": round_label(self.round_id)})
                    async with self.lock:
                        self.server.abort()
                        self._finish_aborted(self.server.aborted)
            await asyncio.sleep(self.limits.result_ttl_s)  # the outcome waits for its fetch
        except asyncio.CancelledError:
            return
        log.warning("round outcome expired unfetched",
                    extra={"round_id": round_label(self.round_id), "state": self.state.value})
        metrics.ROUNDS_EXPIRED.inc()
        self._on_expire(self)

    async def _until_closable(self) -> None:
        """Wait for the open stage's deadline, an early close, or (with ``quiet_close_s``) a
        quiet spell after at least n_min answers."""
        quiet = self.limits.quiet_close_s
        while not self._wake.is_set():
            timeout = _deadline_ms(self.config, self.stage) / 1000 - time.time()
            if timeout <= 0:
                return
            # (Not UNMASK: it closes as soon as every secret can be rebuilt; before that, a
            # quiet spell would only turn a late share into an aborted round.)
            if quiet > 0 and self.server.stage != Stage.UNMASK:
                if self.server.received() >= self.config.n_min:
                    silent = time.monotonic() - max(self._last_accepted, self._stage_opened)
                    if silent >= quiet:
                        return
                    timeout = min(timeout, quiet - silent)
                else:
                    timeout = min(timeout, quiet)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _close(self) -> None:
        async with self.lock:
            if self.finished.is_set():
                return
            self._wake.clear()
            stage = self.server.stage
            early = time.time() * 1000 < _deadline_ms(self.config, stage)
            started = time.perf_counter()
            try:
                requests = await asyncio.to_thread(self.server.close_stage)
            except SecAggAbort as exc:
                self._finish_aborted(exc)
                return
            finally:
                metrics.CLOSE_SECONDS.labels(stage.name).observe(time.perf_counter() - started)
            now = time.monotonic()
            metrics.STAGE_SECONDS.labels(stage.name).observe(now - self._stage_opened)
            metrics.STAGE_DEVICES.labels(stage.name).observe(self.server.counts.get(stage, 0))
            if early:
                metrics.EARLY_CLOSES.labels(stage.name).inc()
            self._stage_opened = now
            self.requests = requests
            self.stage = self.server.stage
            log.info("stage closed", extra={
                "round_id": round_label(self.round_id), "stage": stage.name,
                "accepted": self.server.counts.get(stage, 0), "early": early,
                "next_requests": len(requests)})
            if self.server.result is not None:
                self.result = self.server.result
                self.state = RoundState.RELEASED
                self.finished.set()
                metrics.ROUNDS_RELEASED.inc()
                log.info("round released", extra={"round_id": round_label(self.round_id),
                                                  "contributors": self.result.num_contributors})
            elif self.server.can_close_early():
                self._wake.set()
            self._notify()

    def _finish_aborted(self, abort: SecAggAbort | None) -> None:
        if self.finished.is_set():
            return
        reason = abort.reason.value if abort is not None else AbortReason.CANCELLED.value
        self.state = RoundState.ABORTED
        self.abort_reason = reason
        self.requests = {}
        self.finished.set()
        metrics.ABORTS.labels(reason).inc()
        log.warning("round aborted", extra={"round_id": round_label(self.round_id),
                                            "stage": self.server.stage.name, "reason": reason})
        self._notify()
