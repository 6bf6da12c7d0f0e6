"""One open round: a ``SecAggServer`` driven on the event loop (the registry holds them).

- Calls into a round's state machine are serialised by the round's asyncio lock; closing a stage
  (the unmasking work is the close of UNMASK) runs in a worker thread under that lock, so other
  rounds and health checks stay responsive.
- Each round has one driver task: it closes the open stage at the config's deadline (Unix ms),
  or as soon as the state machine says waiting cannot change the outcome
  (``SecAggServer.can_close_early``: every expected device answered, or every secret has t
  shares), or, if the service is configured with ``quiet_close_s``, once n_min devices answered
  and then none for that long (a quarter of it once all but ``quiet_close_tail`` of the
  expected devices answered, never while more than four times that share is missing, and never
  when the close itself would abort the round, ``SecAggServer.closing_keeps_round``; every
  stage but UNMASK).
- Devices long-poll for their next request (:meth:`Round.await_request`); the coordinator waits
  for the outcome (:meth:`Round.wait_finished`).
- A masked vector reaches :meth:`Round.submit` only when complete; the state machine adds it to
  the running sum and it is dropped.
- A released sum is kept until the coordinator fetched it, or until ``result_ttl_s`` after the
  round finished (then the driver hands the round to ``on_expire``, and the registry forgets it).
- Before the first unmask request becomes visible to any device, the round marks
  ``reached_unmask`` and awaits ``hooks.before_unmask`` (the registry's durable journal record);
  if that fails no request goes out and the round aborts. Whatever happens afterwards (an
  abort for a corrupt share, an out-of-range sum, a cancel, a shutdown), the round reports that
  unmasking began. ``hooks.finished`` is told of every outcome once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fedhh.errors import AuthenticationError, ConfigError, StateError
from fedhh.rpc import serving
from fedhh.rpc.aggregator_wire import UPLOAD_IDLE_S, UPLOAD_MIN_RATE, RequestEncoder
from fedhh.rpc.serving import MAX_PENDING_CALLS
from fedhh.secagg import (
    AbortReason,
    AggregateResult,
    Decline,
    DeviceMessage,
    ProtocolViolation,
    RoundConfig,
    SecAggAbort,
    SecAggServer,
    ServerMessage,
    SignedConfig,
    Stage,
    Violation,
)
from fedhh.secagg.config import MAX_ROUND_S, Admission
from fedhh_aggregator import metrics
from fedhh_aggregator.errors import CallToAbortedRound, EarlierCallOpen

log = logging.getLogger(__name__)

__all__ = ["STOPPED", "AwaitOutcome", "AwaitStatus", "Limits", "Round", "RoundHooks", "RoundState",
           "round_label"]

# Rejections that are about timing or membership, not about the message: FAILED_PRECONDITION.
_NOT_NOW = frozenset({Violation.EARLY, Violation.LATE, Violation.NOT_IN_ROUND})
# The stage whose request follows a submission, where that does not depend on the round (a
# table: Stage(stage + 1) was three calls of the enum's, for every device's every message).
_NEXT_STAGE = {Stage.ADVERTISE_KEYS: Stage.SHARE_KEYS, Stage.SHARE_KEYS: Stage.MASKED_INPUT,
               Stage.CONSISTENCY_CHECK: Stage.UNMASK}
STOPPED = "aggregator_stopped"  # abort reason of the rounds running when the service stops
# The largest legitimate message: a vector chunk (1 MiB) plus its header (session, credentials
# with the admission's Merkle proof: well under 2 KiB). Share lists stay far below it (k * 112 B).
MAX_MESSAGE_BYTES = (1 << 20) + (16 << 10)


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


def _wake(waiter: asyncio.Future[None]) -> None:
    """Resolve a long-poll's waiter unless it is done (woken before, or its poll cancelled)."""
    if not waiter.done():
        waiter.set_result(None)


@dataclass(frozen=True)
class AwaitOutcome:
    status: AwaitStatus
    request: ServerMessage | None = None
    abort_reason: str = ""


def check_tombstone_ttl(tombstone_ttl_s: float, max_round_s: float,
                        names: tuple[str, str] = ("tombstone_ttl_s", "max_round_s")) -> None:
    """ConfigError unless finished rounds are remembered at least as long as a config's last
    deadline may be ahead: a tombstone refuses its round's reopening, so it must outlive every
    deadline the config holds. One rule for an aggregator and the combiner (``Limits``,
    ``CombinerLimits`` and both commands' options, ``names`` naming them); before, the combiner
    had no --max-round-seconds and remembered a round for any --tombstone-ttl."""
    if not tombstone_ttl_s >= max_round_s:
        raise ConfigError(f"{names[0]} must be at least {names[1]} ({max_round_s:g}), got "
                          f"{tombstone_ttl_s!r}")


def check_last_deadline(config: RoundConfig, max_round_s: float, what: str) -> None:
    """ConfigError when ``what``'s (a round's, a shard's) last deadline has passed or is more
    than ``max_round_s`` ahead (``check_tombstone_ttl``: its tombstone outlives it)."""
    now_ms = time.time() * 1000
    last = config.deadlines.unmask
    if last <= now_ms:
        # (the deadline's own epoch milliseconds, which this said alone, name no cause)
        raise ConfigError(f"{what}'s last deadline passed {now_ms - last:.0f} ms before it "
                          "reached this service, by its clock: the round's stage windows are "
                          "shorter than its opening took, or the coordinator's clock is "
                          "behind this host's")
    if last > now_ms + max_round_s * 1000:
        raise ConfigError(f"{what}'s last deadline is more than {max_round_s} s ahead")


@dataclass(frozen=True)
class Limits:
    """Resource bounds of the service (the CLI exposes each)."""

    max_rounds: int = 16  # rounds held at once (running, or finished and unfetched)
    max_wait_s: float = 60.0  # cap of any long-poll
    result_ttl_s: float = 600.0  # a finished round's outcome is kept this long for the fetch
    max_round_s: float = MAX_ROUND_S  # the last deadline of a config may be at most this far ahead
    max_uploads: int = 32  # masked vectors buffered at once (each is dimension * 2 or 4 bytes)
    # Calls that reached the server but wait for its event loop to start them. gRPC core sheds
    # calls beyond this backlog (at random, all of them at twice it) with a bare CANCELLED
    # before any handler runs; every device of a round calls at about the same moment when a
    # stage opens, so keep it well above twice the devices of the rounds open at once.
    max_pending_calls: int = MAX_PENDING_CALLS
    # Close a stage (not UNMASK, which closes once every secret can be rebuilt) before its
    # deadline once at least n_min devices answered it and none for this long (0: off).
    # Devices that drop out are silent, so without it every stage that lost one waits for its
    # deadline; with it the round moves at the pace of the live devices, and a device slower
    # than this after the others counts as dropped.
    quiet_close_s: float = 0.0
    # How the quiet spell depends on the share m of the devices a stage expects that have not
    # answered: m <= tail, a quarter of it (the few still missing are most likely the silent
    # dropouts, and waiting the whole spell for them costs every stage); m <= 4 tail, the
    # whole spell; more missing, no quiet close at all (so many silent devices are more likely
    # starved of CPU or network than gone: a premature close would prune the round below
    # n_min). 0: always the whole spell, whatever is missing.
    quiet_close_tail: float = 0.05
    # Limits before work. A message above max_message_bytes is refused by gRPC before it is
    # parsed (RESOURCE_EXHAUSTED). A client connection may have at most
    # max_streams_per_connection calls open (its further calls wait); a device process shares
    # one connection among its simulated devices, each with one long-poll open at a time.
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_streams_per_connection: int = 4096
    max_polls_per_device: int = 4  # long-polls (AwaitStage, wait_next_ms) open per device
    # Session streams whose device has not sent its open yet (each ~10 KB; no credential is
    # known before the open): one more is refused UNAVAILABLE at once, which devices retry.
    # Without a cap, streams of nobody grew a worker by ~10 KB each, up to
    # max_streams_per_connection on every connection. Far above a worker's share of a round's
    # devices all opening at once (a million devices over 16 workers: 62,500 each).
    max_unopened_sessions: int = 1 << 17
    # An upload whose next message does not arrive within upload_idle_s, or that runs slower
    # than upload_min_rate bytes/s after that grace, is cut off (DEADLINE_EXCEEDED) and frees
    # its slot; a device has at most one upload in progress, so no member holds every slot.
    upload_idle_s: float = UPLOAD_IDLE_S
    upload_min_rate: int = UPLOAD_MIN_RATE
    # Finished rounds are remembered (GetOutcome; no reopening) for tombstone_ttl_s, at most
    # max_tombstones of them (the oldest go first). The age must cover max_round_s, so a
    # config can never be reopened while its deadlines are still ahead.
    max_tombstones: int = 4096
    tombstone_ttl_s: float = 7 * 24 * 3600.0

    def __post_init__(self) -> None:
        for name in ("max_rounds", "max_uploads", "max_pending_calls", "max_message_bytes",
                     "max_streams_per_connection", "max_polls_per_device", "upload_min_rate",
                     "max_tombstones", "max_unopened_sessions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not self.quiet_close_s >= 0:
            raise ConfigError(f"quiet_close_s must be >= 0, got {self.quiet_close_s!r}")
        if not 0 <= self.quiet_close_tail < 1:
            raise ConfigError(f"quiet_close_tail must be in [0, 1), got "
                              f"{self.quiet_close_tail!r}")
        if self.max_pending_calls > 1 << 30:  # gRPC takes twice it as a C int
            raise ConfigError(f"max_pending_calls must be at most {1 << 30}")
        # The ceiling is every port's receive cap (serving.check_receive_cap's), one figure.
        if not 64 << 10 <= self.max_message_bytes <= serving.MAX_MESSAGE_BYTES:
            raise ConfigError(f"max_message_bytes must be in [64 KiB, "
                              f"{serving.MAX_MESSAGE_BYTES >> 20} MiB], got "
                              f"{self.max_message_bytes}")
        for name in ("max_wait_s", "result_ttl_s", "max_round_s", "upload_idle_s",
                     "tombstone_ttl_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)!r}")
        check_tombstone_ttl(self.tombstone_ttl_s, self.max_round_s)

    @property
    def body_timeout_s(self) -> float:
        """How long a one-message request may take to arrive: the upload rules' grace, then
        the receive cap at ``upload_min_rate`` (a unary call's whole request on the gRPC and
        Connect ports, whose progress the service does not see)."""
        return self.upload_idle_s + self.max_message_bytes / self.upload_min_rate


@dataclass(frozen=True)
class RoundHooks:
    """What a round tells its registry: ``before_unmask`` is awaited before the first unmask
    request becomes visible (raise OSError to stop it going out); ``finished`` once, when the
    round released or aborted."""

    before_unmask: Callable[[Round], Awaitable[None]]
    finished: Callable[[Round], None]
    expired: Callable[[Round], None]


async def _nothing(round_: Round) -> None:
    return None


NO_HOOKS = RoundHooks(_nothing, lambda round_: None, lambda round_: None)


def round_label(round_id: bytes) -> str:
    """A round id for logs (ids are coordinator-chosen bytes, usually text)."""
    return round_id.decode("utf-8", errors="backslashreplace")


MAX_ROUND_ID_BYTES = 64  # RoundConfig's bound


async def wait_capped(event: asyncio.Event, wait_s: float, cap_s: float) -> None:
    """A long-poll's wait: for ``event``, up to ``wait_s`` but never past ``cap_s``."""
    if not event.is_set() and wait_s > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), min(wait_s, cap_s))


def check_round_id(raw: bytes) -> bytes:
    """A round id from a control request, within RoundConfig's bounds."""
    round_id = bytes(raw)
    if not 1 <= len(round_id) <= MAX_ROUND_ID_BYTES:
        raise ConfigError(f"round_id must be 1..{MAX_ROUND_ID_BYTES} bytes, got {len(round_id)}")
    return round_id


class Round:
    """One open round: its state machine, lock, driver task and waiters."""

    def __init__(self, server: SecAggServer, signed: SignedConfig, limits: Limits,
                 hooks: RoundHooks = NO_HOOKS) -> None:
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
        self.reached_unmask = False  # unmask requests were (or were about to be) published
        self.result: AggregateResult | None = None
        self.finished = asyncio.Event()
        self.sent_held = False  # (``RoundBook._expired``)
        # Long-polls waiting for a change, each on its own future, in the order they came
        # (resolved by _notify; a poll that ends otherwise takes its own out): a future and a
        # timer per wait cost a third of asyncio.wait_for's task.
        self._waiters: dict[asyncio.Future[None], None] = {}
        self._wake = asyncio.Event()  # the open stage may close early
        self._hooks = hooks
        self._polls: dict[int, int] = {}  # long-polls open per device
        self.uploading: set[int] = set()  # devices with an upload in progress
        # Each device's session stream (fedhh_aggregator.session_stream): one at a time.
        self.streams: dict[int, Any] = {}
        self.encoder = RequestEncoder()  # the requests' wire bytes, shared parts encoded once
        self.upload_digests: dict[int, bytes] = {}  # SHA-256 of each accepted masked vector
        self._stage_opened = time.monotonic()
        self._last_accepted = self._stage_opened  # the open stage's latest accepted message
        self._closable_at: tuple[Stage, int] | None = None  # see _closing_keeps_round
        self._closable = False
        self._task: asyncio.Task[None] | None = None
        self.declined = 0  # members that gave up their seats (GetOutcome's count)

    @property
    def stage_devices(self) -> tuple[tuple[Stage, int], ...]:
        """Devices whose message each closed stage accepted, in stage order."""
        return tuple(sorted(self.server.counts.items()))

    def start(self) -> None:
        self._task = asyncio.create_task(self._drive(), name=f"round {round_label(self.round_id)}")

    @property
    def driver(self) -> asyncio.Task[None] | None:
        """The task that closes the stages and, after the round, expires its outcome."""
        return self._task

    def stop(self, reason: str = AbortReason.CANCELLED.value) -> None:
        """Stop the driver and drop everything (the registry forgot the round); a running
        round aborts with ``reason``."""
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        if self.state == RoundState.RUNNING:
            if not self.lock.locked():
                self.server.abort()  # (a close running in a thread is simply abandoned)
            self._finish_aborted(None, reason)
        self.result = None
        self.server.result = None
        self.requests = {}
        self.encoder = RequestEncoder()
        self._notify()  # long-polls answer now

    # -- authentication --------------------------------------------------------------------------

    def admitted(self, admission: Admission) -> bool:
        """True iff ``admission`` proves its keys are the cohort member's under the signed
        config's identity root (:meth:`SecAggServer.admitted`, which proves each once)."""
        return self.server.admitted(admission)

    # -- device side -----------------------------------------------------------------------------

    async def submit(self, stage: Stage, message: DeviceMessage) -> bool:
        """Hand one authenticated message to the state machine (True: accepted; False:
        identical duplicate). Raises ProtocolViolation, StateError, AuthenticationError or
        CallToAbortedRound without changing anything."""
        accepted = await self._handled(stage, self.server.handle, stage, message)
        (metrics.MESSAGES_ACCEPTED if accepted else metrics.MESSAGES_DUPLICATE)[stage].inc()
        return accepted

    async def decline(self, message: Decline) -> bool:
        """An authenticated device gives up its seat (``SecAggServer.handle_decline``): True
        the first time, False for a repeat; raised as :meth:`submit` raises. The open stage
        may then close at once: it no longer waits for this device."""
        accepted = await self._handled(Stage.ADVERTISE_KEYS, self.server.handle_decline, message)
        (metrics.DECLINED if accepted else metrics.DECLINE_REPEATED).inc()
        if accepted:
            self.declined += 1
        return accepted

    async def _handled(self, stage: Stage, handle: Callable[..., bool], *args: Any) -> bool:
        """``handle(*args)`` (the state machine's handling of one message for ``stage``) under the
        round's lock, its rejections mapped to the service's errors; wakes the driver when
        the open stage may close early."""
        async with self.lock:
            try:
                accepted = handle(*args)
            except SecAggAbort as exc:
                raise CallToAbortedRound(f"round aborted ({exc.reason.value})") from None
            except ProtocolViolation as exc:
                metrics.MESSAGES.labels(stage.name, exc.reason.value).inc()
                if exc.reason == Violation.BAD_SIGNATURE:
                    raise AuthenticationError(str(exc)) from None
                if exc.reason in _NOT_NOW:
                    raise StateError(str(exc)) from None
                raise
            if accepted:
                self._last_accepted = time.monotonic()
                if self.server.can_close_early():
                    self._wake.set()
            return accepted

    async def await_request(self, device_id: int, stage: Stage,
                            wait_s: float | None) -> AwaitOutcome:
        """This device's request for ``stage``, waiting up to ``wait_s`` (capped at
        ``max_wait_s``) for the stage to open; ``wait_s`` None: until its answer is known (a
        session stream's pusher, which the stream's own deadline bounds), never PENDING."""
        if stage not in (Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK,
                         Stage.UNMASK):
            raise ProtocolViolation(Violation.MALFORMED, f"no requests are sent for {stage.name}")
        if stage == Stage.CONSISTENCY_CHECK and not self.config.consistency_check:
            raise ProtocolViolation(Violation.MALFORMED, "this round has no consistency check")
        open_polls = self._polls.get(device_id, 0)
        if open_polls >= self.limits.max_polls_per_device:
            raise EarlierCallOpen(f"device {device_id} already has {open_polls} long-polls open")
        self._polls[device_id] = open_polls + 1
        try:
            return await self._await_request(device_id, stage, wait_s)
        finally:
            left = self._polls[device_id] - 1
            if left:
                self._polls[device_id] = left
            else:
                del self._polls[device_id]

    async def _await_request(self, device_id: int, stage: Stage,
                             wait_s: float | None) -> AwaitOutcome:
        loop = asyncio.get_running_loop()
        until = None if wait_s is None else loop.time() + max(0.0, min(wait_s,
                                                                       self.limits.max_wait_s))
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
            if until is not None and until <= loop.time():
                return AwaitOutcome(AwaitStatus.PENDING)
            await self.next_change(until)

    async def next_change(self, until: float | None) -> None:
        """Return at the round's next change of stage or state (``_notify``), or once the
        loop's clock reaches ``until`` (None: no bound)."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiters[waiter] = None
        timer = None if until is None else loop.call_at(until, _wake, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self._waiters.pop(waiter, None)

    def upload_precheck(self, device_id: int) -> None:
        """What the state machine would say about ``device_id``'s masked input, said before a
        byte of it is received (the stage only moves forward): raises CallToAbortedRound or
        StateError."""
        if self.state == RoundState.ABORTED:
            raise CallToAbortedRound(f"round aborted ({self.abort_reason})")
        if self.stage < Stage.MASKED_INPUT:
            raise StateError("the masked-input stage has not started")
        if self.stage > Stage.MASKED_INPUT or self.upload_deadline() <= 0:
            raise StateError("the masked-input stage has closed")
        if device_id not in self.requests:
            raise StateError(f"device {device_id} got no masked-input request")

    def stage_after(self, stage: Stage) -> Stage:
        """The stage whose request follows a submission for ``stage`` (not UNMASK, the last)."""
        if stage == Stage.MASKED_INPUT:
            return Stage.CONSISTENCY_CHECK if self.config.consistency_check else Stage.UNMASK
        after = _NEXT_STAGE.get(stage)
        if after is None:
            raise ProtocolViolation(Violation.MALFORMED, f"no request follows {stage.name}")
        return after

    def upload_deadline(self) -> float:
        """Seconds until the masked-input stage's deadline (uploads must finish by then)."""
        return self.config.deadlines.at_s(Stage.MASKED_INPUT) - time.time()

    # -- coordinator side -------------------------------------------------------------------------

    async def wait_finished(self, wait_s: float) -> RoundState:
        await wait_capped(self.finished, wait_s, self.limits.max_wait_s)
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
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters:
            _wake(waiter)

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
        log.warning("round outcome expired unfetched" if not self.sent_held else
                    "round outcome expired: sent, never said stored",
                    extra={"round_id": round_label(self.round_id), "state": self.state.value})
        metrics.ROUNDS_EXPIRED.inc()
        self._hooks.expired(self)

    def _quiet_spell(self) -> float | None:
        """The silence that closes the open stage now, or None (fewer than n_min answers, a
        close that would abort the round, or too many missing: see
        ``Limits.quiet_close_tail``)."""
        received = self.server.received()
        if received < self.config.n_min or not self._closing_keeps_round(received):
            return None
        quiet, tail = self.limits.quiet_close_s, self.limits.quiet_close_tail
        if tail == 0:
            return quiet
        missing = self.server.expected_count() - received
        expected = received + missing
        if missing <= tail * expected:
            return quiet / 4
        if missing <= 4 * tail * expected:
            return quiet
        return None

    def _closing_keeps_round(self, received: int) -> bool:
        """``SecAggServer.closing_keeps_round``, asked again only once the stage has accepted
        another message (its pruning walks every device's neighbours)."""
        key = (self.server.stage, received)
        if self._closable_at != key:
            self._closable_at, self._closable = key, self.server.closing_keeps_round()
        return self._closable

    async def _until_closable(self) -> None:
        """Wait for the open stage's deadline, an early close, or (with ``quiet_close_s``) a
        quiet spell after at least n_min answers (a quarter of it once all but
        ``quiet_close_tail`` of the expected devices answered)."""
        quiet = self.limits.quiet_close_s
        while not self._wake.is_set():
            timeout = self.config.deadlines.at_s(self.stage) - time.time()
            if timeout <= 0:
                return
            # (Not UNMASK: it closes as soon as every secret can be rebuilt; before that, a
            # quiet spell would only turn a late share into an aborted round.)
            if quiet > 0 and self.server.stage != Stage.UNMASK:
                needed = self._quiet_spell()
                if needed is not None:
                    silent = time.monotonic() - max(self._last_accepted, self._stage_opened)
                    if silent >= needed:
                        return
                    # (look again at least every quarter spell: more answers may shorten it)
                    timeout = min(timeout, needed - silent, quiet / 4)
                else:
                    timeout = min(timeout, quiet / 4)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _close(self) -> None:
        async with self.lock:
            if self.finished.is_set():
                return
            self._wake.clear()
            stage = self.server.stage
            early = time.time() * 1000 < self.config.deadlines.of(stage)
            started = time.perf_counter()
            try:
                requests = await asyncio.to_thread(self.server.close_stage)
            except SecAggAbort as exc:
                self._finish_aborted(exc)
                return
            finally:
                metrics.CLOSE_SECONDS.labels(stage.name).observe(time.perf_counter() - started)
            if self.server.stage == Stage.UNMASK and stage != Stage.UNMASK:
                # From here on devices may reveal shares: say so durably before any can.
                self.reached_unmask = True
                try:
                    await self._hooks.before_unmask(self)
                except OSError as error:
                    log.error("could not record the start of unmasking; aborting the round",
                              extra={"round_id": round_label(self.round_id),
                                     "error": str(error)})
                    self.server.abort(AbortReason.CANCELLED, "the journal could not be written")
                    self._finish_aborted(self.server.aborted)
                    return
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
                self._hooks.finished(self)
            elif self.server.can_close_early():
                self._wake.set()
            self._notify()

    def _finish_aborted(self, abort: SecAggAbort | None,
                        reason: str = AbortReason.CANCELLED.value) -> None:
        if self.finished.is_set():
            return
        if abort is not None:
            reason = abort.reason.value
        self.state = RoundState.ABORTED
        self.abort_reason = reason
        self.requests = {}
        self.finished.set()
        metrics.ABORTS.labels(reason).inc()
        log.warning("round aborted", extra={"round_id": round_label(self.round_id),
                                            "stage": self.server.stage.name, "reason": reason,
                                            "reached_unmask": self.reached_unmask})
        self._notify()
        self._hooks.finished(self)
