"""Many simulated devices in one process, each an asyncio task with its own data, identity key,
credential, randomness and privacy budget.

A device enrolls once with its one-time enrollment token (its id, credential and identity key
are kept in the state directory, so a restarted process keeps its devices), then polls the
coordinator for tasks with jittered exponential backoff. For each task it verifies the
coordinator's signature and that the task is its own, takes its report from its own budget
(``fedhh_device.budget``: a retried round gets the same report, a spent budget gets none), and
runs the secure-aggregation protocol with the aggregator. Coordinator or aggregator restarts
only cost retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import grpc
import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.backoff import ceiling
from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.data.long_items import not_denied, past_codes
from fedhh.device import RandomSource, SecureSource, streams
from fedhh.errors import AuthenticationError, ConfigError, FedhhError
from fedhh.output_paths import open_new
from fedhh.rpc.channel_pool import DEVICE_CALLS_PER_CONNECTION
from fedhh.rpc.credentials import bearer_metadata
from fedhh.rpc.crowd_event import CrowdEvent
from fedhh.rpc.device_client import RetryPolicy, Transport
from fedhh.rpc.device_users import enroll_request
from fedhh.rpc.participation import RETRIED_CODES, ComputeTurns
from fedhh.rpc.tasks import verify_task
from fedhh.secagg import RoundKeys, Stage
from fedhh.secagg.graph import ROUNDS_REMEMBERED
from fedhh.secagg.primitives import ed25519_verify, system_random
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh.v1.aggregator_pb2_grpc import SecureAggregationStub
from fedhh_device.budget import DeviceBudget
from fedhh_device.report import DeviceData, make_report
from fedhh_device.secagg_run import (
    DropPlan,
    Floors,
    decline_round,
    log_round_counts,
    run_secure_aggregation,
)
from fedhh_device.timing import CallStats

log = logging.getLogger(__name__)
# How long a GetTask long-poll asks to be held (the coordinator's bound). The coordinator
# answers when this device's task changes: a task, or "none" once (not drawn, refused, the run
# over); a device that joined check-in waits there until the cohort is drawn (minutes at 50,000
# devices), one that finished its round until the next check-in. At 10 s, then 55 s, the
# re-polls of the waiting devices kept the coordinator and the device processes busy (with the
# shed calls' retries, 37 calls per device a round at 50,000). Stopping does not wait for it
# (the run task is cancelled).
GET_TASK_WAIT_MS = 30 * 60_000
# A failed GetTask (or enrolment call, ``Fleet._retry``) is made again after a full-jitter
# exponential backoff (``retry_pause``): of up to a minute when the coordinator shed the call
# (CANCELLED: its backlog was full; RESOURCE_EXHAUSTED), of up to 10 s otherwise (an
# unreachable coordinator: the channel's reconnection backoff paces those calls already). With
# at most 10 s (+-50%) for all, 50,000 devices checking in at once kept 33,000 of them in a
# loop of shed calls whose cost starved the coordinator (39 of 40 probe calls were shed four
# minutes into check-in).
# (Both caps hold for every try: RetryPolicy's patient cap, 30 s, raised the unreachable one
# from the 5th failure on, so after a coordinator restart the devices came back over 33 s, and
# its first 10 s check-in held 82 of 200.)
GET_TASK_RETRY = RetryPolicy(initial_backoff_s=0.2, max_backoff_s=10.0,
                             patient_max_backoff_s=10.0)
GET_TASK_SHED_RETRY = RetryPolicy(initial_backoff_s=0.2, max_backoff_s=60.0,
                                  patient_max_backoff_s=60.0)
_SHED = frozenset({grpc.StatusCode.CANCELLED, grpc.StatusCode.RESOURCE_EXHAUSTED})


def retry_pause(code: grpc.StatusCode, failures: int, rng: random.Random) -> float:
    """The pause before a call that failed with ``code`` (after ``failures`` failures before
    it) is made again."""
    return (GET_TASK_SHED_RETRY if code in _SHED else GET_TASK_RETRY).backoff(failures, rng)


# A GetTask answered without a task (its retry_after_ms), or with nothing new (a task refused,
# or one this device has done), is asked again after the wait the coordinator asks for, at
# least NO_TASK_FLOOR_S and at most NO_TASK_MAX_WAIT_S, plus up to half of it again (jitter).
# Such answers that come back sooner than NO_TASK_HELD_S (the coordinator did not hold the
# long-poll) double the floor, up to NO_TASK_MAX_BACKOFF_S: the fleet slept retry_after_ms as
# given, so a coordinator answering "nothing, retry after 0 ms" had every device re-poll at once,
# in a loop, as fast as it answered. An answer held longer starts the doubling afresh.
NO_TASK_FLOOR_S = 1.0
NO_TASK_MAX_BACKOFF_S = 60.0
NO_TASK_MAX_WAIT_S = 600.0
NO_TASK_HELD_S = 5.0


# A device is handed only the current attempts of the runs under way, so the last few tasks it
# took cover every one it could be handed again.
REMEMBERED_TASKS = 64
# The runs (and aggregator addresses) a process remembers having told its log of: a process
# that lives through more runs than this may tell of an early one again, if it comes back.
RUNS_TOLD = 256
K = TypeVar("K")



def refused_tokens_message(refused: dict[int, str], state_dir: Path | None) -> str:
    """The error for the users whose enrollment tokens the coordinator refused (``refused``:
    each user's reason; ``state_dir``: the --state-dir that holds no identity for them), in
    the singular for one user (before, "the enrollment tokens of 1 users")."""
    users = sorted(refused)
    shown = ", ".join(map(str, users[:5])) + (", ..." if len(users) > 5 else "")
    one = len(users) == 1
    here = (f" ({state_dir} holds none for {'it' if one else 'them'})"
            if state_dir is not None else "")
    if one:
        return (f"the coordinator refused the enrollment token of user {shown}: "
                f"{refused[users[0]]}. A token enrolls one identity once: if this user enrolled "
                f"before, its identity is in the --state-dir that enrolled it{here}; otherwise "
                "mint a new token (fedhh admin mint-tokens --users)")
    return (f"the coordinator refused the enrollment tokens of {len(users)} users ({shown}): "
            f"{refused[users[0]]}. A token enrolls one identity once: if these users "
            f"enrolled before, their identities are in the --state-dir that enrolled them"
            f"{here}; otherwise mint new tokens (fedhh admin mint-tokens --users)")


class Remembered(Generic[K]):
    """The last ``bound`` keys added, the oldest forgotten first: the (run, round, attempt) of
    the tasks a device took, the runs and addresses a process told of once.
    Before, each was a set that grew for as long as the process ran; a task forgotten and
    handed again would meet the device's budget, which answers a round only with its kept
    report or a refusal, and a run told of again is one more line in the log."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._kept: dict[K, None] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._kept

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, key: K) -> bool:
        """Remember ``key``; whether it was new (not remembered)."""
        if key in self._kept:
            return False
        self._kept[key] = None
        while len(self._kept) > self.bound:
            del self._kept[next(iter(self._kept))]
        return True


def no_task_pause(retry_after_ms: int, quick_answers: int, rng: random.Random) -> float:
    """Seconds to wait before asking again after a GetTask that brought nothing to do: the
    coordinator's ``retry_after_ms`` within [floor, NO_TASK_MAX_WAIT_S], or the floor doubled
    for each of ``quick_answers`` answers in a row that came at once (whichever is longer),
    times a jitter in [1, 1.5) drawn from ``rng``."""
    if quick_answers < 0:
        raise ValueError(f"quick_answers must be >= 0, got {quick_answers}")
    asked = min(max(retry_after_ms, 0) / 1000, NO_TASK_MAX_WAIT_S)
    backoff = ceiling(NO_TASK_FLOOR_S, NO_TASK_MAX_BACKOFF_S, quick_answers)
    return max(asked, backoff) * (1 + 0.5 * rng.random())


# What an Enroll answers a token that cannot enroll this device (unknown, used, expired; its
# key already enrolled): reported together, not retried.
_REFUSED_ENROLLMENT = frozenset({grpc.StatusCode.UNAUTHENTICATED,
                                 grpc.StatusCode.ALREADY_EXISTS})
# What ``Fleet._retry`` calls again (an Enroll is answered again for the same signed request):
# the codes every device call retries (unreachable; CANCELLED, a call shed past the
# coordinator's backlog), the shed ones its pauses are sized for, and a call too slow to answer.
# Before, CANCELLED was left out: a shed Enroll ended the enrolment with the error, though
# its pause was sized for it.
_RETRIED = RETRIED_CODES | _SHED | {grpc.StatusCode.DEADLINE_EXCEEDED}
# Devices that share one connection to an aggregator (--devices-per-connection). A device's
# session stream stays open for its whole round, and an aggregator admits
# --max-streams-per-connection (4096) streams on a connection: a device beyond them waited for
# a stream that only a finished session frees, while the stage waited for it (10,000 devices in
# one process, 5,000 per worker: 141 of 20,000 advertised their keys before the deadline). A
# real device has its own connection; a fleet's share one per 1,024, well within the cap with
# room for reopened streams.
DEVICES_PER_CONNECTION = DEVICE_CALLS_PER_CONNECTION
# Session streams of one fleet that may be opening at once (--opens-in-flight): from the
# stream's start until the device has written its signed answer to the aggregator's challenge,
# which the aggregator awaits for --upload-idle-ms (5 s). 10,000 devices in one process that
# got their tasks together started 10,000 streams at once; the event loop reached many of their
# challenges after 5 s, those opens were refused and made again (18,552 to 23,000 of them in a
# 20,000-device round; 512 with this bound), and each reopening was paid for by the devices and
# the workers alike. The rest wait their turn before starting a stream, which costs nothing.
OPENS_IN_FLIGHT = 256


@dataclass
class Identity:
    device_id: int
    credential: bytes
    key: Ed25519PrivateKey
    coordinator_public: bytes

    @functools.cached_property
    def public(self) -> bytes:
        """The identity key's raw public key (derived once, not every round)."""
        return self.key.public_key().public_bytes_raw()

    def to_json(self) -> dict[str, Any]:
        raw = self.key.private_bytes(serialization.Encoding.Raw,
                                     serialization.PrivateFormat.Raw,
                                     serialization.NoEncryption())
        return {"device_id": self.device_id, "credential": self.credential.hex(),
                "key": raw.hex(), "coordinator_public": self.coordinator_public.hex()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Identity:
        return Identity(int(data["device_id"]), bytes.fromhex(data["credential"]),
                        Ed25519PrivateKey.from_private_bytes(bytes.fromhex(data["key"])),
                        bytes.fromhex(data["coordinator_public"]))


STATE_FILE = "devices.json"  # the enrolled identities in a --state-dir


def load_identities(state_file: Path | None) -> dict[int, Identity]:
    """The identities enrolled in ``state_file`` (none if there is none), by user."""
    if state_file is None or not state_file.exists():
        return {}
    try:
        data = json.loads(state_file.read_text())
        if not isinstance(data, dict):
            raise TypeError(f"not a JSON object of users' identities but {type(data).__name__}")
        return {int(u): Identity.from_json(v) for u, v in data.items()}
    # (before, JSON other than an object, a device id of 1e400 and arrays nested thousands
    # deep ended the process in a traceback: AttributeError, OverflowError, RecursionError)
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as error:
        raise ConfigError(f"{state_file} is corrupt: {error}") from None


def no_token(user: int, state_dir: Path | None) -> ConfigError:
    """The refusal of ``user``, who has no identity in ``state_dir`` and no enrollment token.
    (Before: "no enrollment token for user 0" alone, for a first start without
    --enrollment-tokens-file.)"""
    where = f"no identity in {state_dir}" if state_dir else "no identity (no --state-dir)"
    return ConfigError(
        f"no enrollment token for user {user}: it has {where} and --enrollment-tokens-file "
        "gives it no token (a device enrolls once, with a token: `fedhh certs` writes "
        "device-tokens.txt, `fedhh admin mint-tokens` mints more)")


def check_tokens(users: list[int], tokens: dict[int, str], state_dir: Path) -> None:
    """Refuse, before any service is asked, the first of ``users`` that could not enroll:
    neither an identity in ``state_dir`` nor a token (``no_token``)."""
    enrolled = load_identities(state_dir / STATE_FILE)
    for user in users:
        if user not in enrolled and user not in tokens:
            raise no_token(user, state_dir)


@dataclass
class FleetStats:
    """Counters and per-stage latencies the load test reads."""

    tasks: int = 0
    completed: int = 0
    dropped: int = 0
    late: int = 0  # a stage closed before the device's message, its masked input not in
    failed: int = 0
    report_seconds: list[float] = field(default_factory=list)
    outcome_seconds: dict[str, list[float]] = field(default_factory=dict)
    calls: CallStats = field(default_factory=CallStats)


class Fleet:
    """The devices of one process."""

    def __init__(
        self,
        users: list[tuple[int, DeviceData]],
        coordinator: grpc.aio.Channel | Any | list[grpc.aio.Channel | Any],
        enrollment_tokens: dict[int, str],
        channel_factory: Callable[[str], grpc.aio.Channel | Any],
        state_dir: Path | None = None,
        seed: int | None = None,
        drop: DropPlan | None = None,
        stop: asyncio.Event | None = None,
        floors: Floors | None = None,
        transport: Transport | None = None,
        devices_per_connection: int = DEVICES_PER_CONNECTION,
        opens_in_flight: int = OPENS_IN_FLIGHT,
        session_factory: Callable[[str, Any], Any] | None = None,
    ) -> None:
        self.users = users
        # A gRPC channel, or a stub of the same shape (fedhh.rpc.connect_client.ConnectStub);
        # or several (the coordinator's selectors): device u starts at the (u mod n)-th and
        # moves to the next one when its call finds the service unavailable.
        channels = coordinator if isinstance(coordinator, list) else [coordinator]
        if not channels:
            raise ConfigError("a fleet needs at least one coordinator address")
        self.stubs = [pb_grpc.DeviceServiceStub(c) if isinstance(c, grpc.aio.Channel) else c
                      for c in channels]
        self.stub = self.stubs[0]
        self.enrollment_tokens = enrollment_tokens
        self.channel_factory = channel_factory
        # Channels to the aggregators' framed session ports (fedhh.rpc.framed), used where a
        # task names one, given the gRPC stub to fall back on (None: the session goes over
        # channel_factory's channels).
        self.session_factory = session_factory
        # A channel, and one stub on it, per aggregator address and devices_per_connection
        # devices (a Connect stub, fedhh.rpc.connect_client, is its own channel).
        self._aggregators: dict[tuple[str, int], tuple[Any, Any]] = {}
        if devices_per_connection < 1:
            raise ConfigError(f"devices_per_connection must be >= 1, got {devices_per_connection}")
        self._connection = {user: i // devices_per_connection
                            for i, (user, _) in enumerate(users)}
        if opens_in_flight < 1:
            raise ConfigError(f"opens_in_flight must be >= 1, got {opens_in_flight}")
        self._opening = asyncio.Semaphore(opens_in_flight)
        # (its devices prepare their tasks and compute their answers in turns, the sockets
        # looked at in between: fedhh.rpc.participation.ComputeTurns)
        self._computing = ComputeTurns()
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.state_file = None if state_dir is None else Path(state_dir) / STATE_FILE
        self._budgets: dict[int, DeviceBudget] = {}
        self.seed = seed
        self.drop = drop or DropPlan()
        self.floors = floors or Floors()
        # The session stream or the unary calls (None: participate's default for the stub).
        self.transport = transport
        # The coordinator signs what a cohort's members receive alike once (fedhh.rpc.tasks):
        # this process's devices of one cohort verify that signature once among them.
        self._verify_shared = functools.lru_cache(maxsize=ROUNDS_REMEMBERED)(ed25519_verify)
        # The (run, codec, bits) whose items past the codes were logged (``_tell_past_codes``),
        # and the countings (and look-ups, ``_tell_unresolved``) under way.
        self._told: Remembered[tuple[str, str, int]] = Remembered(RUNS_TOLD)
        self._counting: set[asyncio.Task[None]] = set()
        # The aggregator addresses tasks named whose names were looked up (``_tell_unresolved``).
        self._looked_up: Remembered[str] = Remembered(RUNS_TOLD)
        self.stop = stop or asyncio.Event()
        self.stats = FleetStats()
        # Retry timing only (never a report's randomness): from the OS's CSPRNG, or seeded
        # for a simulation's reproducible runs.
        self._jitter: random.Random = (random.SystemRandom() if seed is None
                                       else random.Random(f"fleet-jitter/{seed}"))
        self._moved: dict[int, int] = {}  # user -> coordinators skipped (unavailable)
        self._rejected: dict[int, str] = {}  # user -> why its credential was rejected
        self._identities: dict[int, Identity] = self._load_state()
        # The pauses wait on this, which ``stop`` sets through one waiter of its own (_relay):
        # a pause that runs out leaves an asyncio.Event's deque by a scan from the front, so a
        # fleet of thousands of devices in backoff paid O(devices) per pause.
        self._stopped = CrowdEvent()
        self._relay: asyncio.Task[None] | None = None

    # ---- identities ----------------------------------------------------------------------
    def _load_state(self) -> dict[int, Identity]:
        return load_identities(self.state_file)

    def _save_state(self) -> None:
        if self.state_file is None:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        fd = open_new(tmp)
        with os.fdopen(fd, "w") as out:
            json.dump({str(u): i.to_json() for u, i in self._identities.items()}, out)
        os.replace(tmp, self.state_file)

    async def enroll_all(self, concurrency: int = 64) -> None:
        """Enroll every device not enrolled yet (a few dozen requests in flight at once)."""
        gate = asyncio.Semaphore(concurrency)

        async def enroll(user: int) -> None:
            key = Ed25519PrivateKey.generate()
            token = self.enrollment_tokens.get(user)
            if token is None:
                raise no_token(user, self.state_dir)
            # (signed with the key it enrolls; a retry sends these same bytes again)
            request = enroll_request(key, token.encode(), label=f"user-{user}")

            async def call() -> pb.EnrollResponse:
                started = time.perf_counter()
                try:
                    return await self._stub(user).Enroll(request)
                finally:
                    self.stats.calls.record("Enroll", time.perf_counter() - started,
                                            request.ByteSize())

            async with gate:
                try:
                    response = await self._retry(call, user)
                except grpc.aio.AioRpcError as error:
                    # (ALREADY_EXISTS: this fresh key enrolled by a call whose answer was lost
                    # too long ago to be sent a credential again; its token is spent all the
                    # same)
                    if error.code() not in _REFUSED_ENROLLMENT:
                        raise
                    refused[user] = error.details() or "refused"
                    return
            if len(response.credential) != 32 or len(response.coordinator_public_key) != 32:
                # (kept, such an identity failed every check-in and every task's signature for
                # good; the web device refuses such an answer too)
                raise ConfigError(
                    f"the enrollment answer for user {user} is malformed (a "
                    f"{len(response.credential)}-byte credential and a "
                    f"{len(response.coordinator_public_key)}-byte coordinator key, not 32 and "
                    "32): is --coordinator the device port of a fedhh coordinator? "
                    "Nothing was kept for this user")
            self._identities[user] = Identity(response.device_id, response.credential, key,
                                              response.coordinator_public_key)

        refused: dict[int, str] = {}
        try:
            # Every enrollment is let finish before anything is raised: one that failed
            # beside others still in flight ended the process while their tokens were being
            # spent, their identities never saved.
            outcomes = await asyncio.gather(*(enroll(user) for user, _ in self.users
                                              if user not in self._identities),
                                            return_exceptions=True)
        finally:
            # Every identity that enrolled is kept, whatever failed beside it: its token is
            # spent, and the next start must not ask for it again.
            self._save_state()
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if refused:
            raise ConfigError(refused_tokens_message(
                refused, self.state_file.parent if self.state_file is not None else None))

    # ---- the device loop -----------------------------------------------------------------
    async def run(self, on_enrolled: Callable[[], None] | None = None) -> None:
        """Enroll every device, then run them all (``on_enrolled`` is called in between)."""
        await self.enroll_all()
        if on_enrolled is not None:
            on_enrolled()
        try:
            await asyncio.gather(*(self._device(user, data) for user, data in self.users))
        finally:
            log_round_counts()
        if self._rejected and not self.stop.is_set():
            # Every device has ended, its credential rejected: the process fails saying why
            # (it ended with status 0 and nothing running, so a supervisor restarted it into
            # the same rejections, each device logging its own error line every time).
            users = sorted(self._rejected)
            shown = ", ".join(map(str, users[:5])) + (", ..." if len(users) > 5 else "")
            where = (f"{self.state_file} holds identities the coordinator never enrolled or has "
                     f"forgotten (its state was reset, or this --state-dir is another "
                     f"deployment's): remove it and enroll these users with new tokens"
                     if self.state_file is not None else
                     "enroll these users again with new tokens")
            raise ConfigError(
                f"the coordinator rejected the credentials of {len(users)} devices (users "
                f"{shown}): {self._rejected[users[0]]}. {where} (fedhh admin mint-tokens "
                f"--users)")

    def _credential_rejected(self, user: int, identity: Identity,
                             failure: grpc.aio.AioRpcError) -> None:
        """``user``'s credential was refused (UNAUTHENTICATED): the device stops. The first of
        this process logs an error; the others a debug line (a reset coordinator rejects them
        all: one line each drowned the cause), and ``run`` names them all if none is left."""
        self._rejected[user] = failure.details() or "rejected"
        extra = {"user": user, "device_id": identity.device_id, "detail": failure.details()}
        if len(self._rejected) == 1:
            log.error("device credential rejected", extra={
                **extra, "others": "further devices of this process rejected so are logged at "
                                   "debug level; the process fails naming them once none is left"})
        else:
            log.debug("device credential rejected", extra=extra)

    async def _device(self, user: int, data: DeviceData) -> None:
        identity = self._identities[user]
        metadata = bearer_metadata(f"{identity.device_id}.{identity.credential.hex()}")
        done: Remembered[tuple[str, int, int]] = Remembered(REMEMBERED_TASKS)
        known = b""  # SHA-256 of the last task this device took part in (or refused)
        # The round keys the next check-in presents; the round's config commits to them, so
        # they are replaced only once a task has used them, and made when a check-in needs
        # them (two scalar multiplications a device's last task would leave unused).
        round_keys: RoundKeys | None = None
        failures = 0
        quick = 0  # answers in a row that brought nothing to do, each at once (no_task_pause)
        while not self.stop.is_set():
            if round_keys is None:
                round_keys = await self._computing.run(
                    functools.partial(RoundKeys.generate, system_random))
            c_pk, s_pk = round_keys.public
            request = pb.GetTaskRequest(device_id=identity.device_id, wait_ms=GET_TASK_WAIT_MS,
                                        known_task=known, c_pk=c_pk, s_pk=s_pk)
            started = time.perf_counter()
            failure: grpc.aio.AioRpcError | None = None
            try:
                response = await self._stub(user).GetTask(request, metadata=metadata)
            except grpc.aio.AioRpcError as error:
                failure = error
            seconds = time.perf_counter() - started
            self.stats.calls.record("GetTask", seconds, request.ByteSize())
            if failure is not None or not response.HasField("task"):
                # (the load test's report splits the calls that brought no task by why)
                why = "none" if failure is None else failure.code().name
                self.stats.calls.record(f"GetTask.{why}", seconds, 0)
            if failure is not None:
                if failure.code() == grpc.StatusCode.UNAUTHENTICATED:
                    self._credential_rejected(user, identity, failure)
                    return
                if failure.code() == grpc.StatusCode.UNAVAILABLE:
                    self._next_stub(user)
                await self._pause(retry_pause(failure.code(), failures, self._jitter))
                failures += 1
                continue
            failures = 0
            task = None
            if response.HasField("task"):
                # A task refused (its signature not the pinned key's, another device's) is
                # known all the same: the next poll waits until the round has another task.
                # Before, it asked again at once, was handed the same task, and refused it
                # again: a coordinator restarted with a new signing key had each of 20 devices
                # poll and log ~30 times a second until the round ended
                # (tests/security/test_device_refusals.py).
                known = hashlib.sha256(response.task.task).digest()
                task = self._verified(response.task, identity)
            if task is None or (task.run_id, task.round, task.attempt) in done:
                quick = quick + 1 if seconds < NO_TASK_HELD_S else 0
                await self._pause(no_task_pause(response.retry_after_ms, max(quick - 1, 0),
                                                self._jitter))
                continue
            quick = 0
            done.add((task.run_id, task.round, task.attempt))
            keys, round_keys = round_keys, None
            try:
                await self._perform(user, data, identity, task, keys)
            except Exception:
                # A task this device could not handle (a bug, a field no check foresaw) fails
                # that task alone: it ended the gather of Fleet.run, and with it every device of
                # the process, on the coordinator's next such task. Logged, with its traceback,
                # to this process's own log.
                self.stats.failed += 1
                log.exception("a device's task failed unexpectedly", extra={
                    "user": user, "device_id": identity.device_id, "run_id": task.run_id,
                    "round": task.round})

    def _verified(self, signed: pb.SignedTask, identity: Identity) -> pb.Task | None:
        try:
            return verify_task(signed, identity.coordinator_public, identity.device_id,
                               self._verify_shared)
        except AuthenticationError as error:
            log.warning("rejected a task", extra={"device_id": identity.device_id,
                                                  "reason": str(error)})
            return None

    def _tell_past_codes(self, task: pb.Task) -> None:
        """Log once a run, at the first task of it here that passed the checks, how many of
        this process's devices' items are longer than the run's codes (the task's codec and
        max_bits: ``fedhh.data.long_items.past_codes``) and how many devices hold one: the
        run finds those only cut. The process cannot say so as it starts: the codes are the
        run's (`fedhh up` and `fedhh simulate` name the items before the first round). Counts
        only: the items stay on the devices. Counted in a thread of its own, which no device
        awaits: on the event loop, 950,000 distinct items at 115 bits (each encoded: few fit
        under the byte bound there) held every device of the process 4.4 s at a round's
        first task."""
        if not self._told.add((task.run_id, task.codec, task.max_bits)):
            return
        counting = asyncio.create_task(self._count_past_codes(task),
                                       name=f"items past the codes of {task.run_id}")
        self._counting.add(counting)
        counting.add_done_callback(self._counting.discard)

    async def _count_past_codes(self, task: pb.Task) -> None:
        try:
            await asyncio.to_thread(self._log_past_codes, task)
        except Exception:  # (a bug: said here, not as a task's unretrieved error)
            log.exception("counting the items past the run's codes failed",
                          extra={"run_id": task.run_id})

    def _log_past_codes(self, task: pb.Task) -> None:
        try:
            codec = Codec.from_spec(task.codec, task.max_bits)
            deny = cw.from_wire(list(task.deny_list), task.max_bits, "task deny list")
        except FedhhError:  # (the report's own check refuses the task)
            return
        words = tuple(sorted({word for _, data in self.users for word in data.words}))
        # (less those the task's deny list denies, cut alike: the run never outputs them)
        long = {words[i] for i in not_denied(past_codes(words, codec), words, codec,
                                             deny).tolist()}
        if long:
            log.warning("items longer than the run's codes: the run finds them only cut", extra={
                "run_id": task.run_id, "max_bits": task.max_bits, "items": len(long),
                "devices_holding": sum(not long.isdisjoint(data.words) for _, data in self.users),
                "devices": len(self.users)})

    def _tell_unresolved(self, task: pb.Task) -> None:
        """Log once an address, at the first task naming it, an aggregator address of the task
        whose name does not resolve here. The coordinator names the address its operator
        configured for devices, and a name only the services' network knows (compose's default
        ``aggregator``) failed every device outside it with gRPC's "errors resolving
        aggregator:7100" a round, and the framed port's warning blamed a firewall; neither said
        which setting names it. Looked up off the devices' path, which no device awaits."""
        for address in (task.aggregator_address, task.aggregator_session_address):
            if address and self._looked_up.add(address):
                lookup = asyncio.create_task(self._look_up(address),
                                             name=f"looking up {address}")
                self._counting.add(lookup)
                lookup.add_done_callback(self._counting.discard)

    async def _look_up(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        try:
            await asyncio.get_running_loop().getaddrinfo(host.strip("[]"), port,
                                                         type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            log.warning(
                "the aggregator address %s that the coordinator names in its tasks does not "
                "resolve here (%s): every round of these devices fails until it does. The "
                "coordinator's --aggregator-public-address and --aggregator-session-address "
                "(compose: FEDHH_AGGREGATOR_PUBLIC_HOST in deploy/.env), or a combiner's "
                "--worker CONTROL=PUBLIC, name it: a name these devices resolve, held by the "
                "server certificate (fedhh certs --hosts)", address, error.strerror,
                extra={"address": address})

    async def _perform(self, user: int, data: DeviceData, identity: Identity, task: pb.Task,
                       round_keys: RoundKeys) -> None:
        self.stats.tasks += 1
        started = time.perf_counter()
        try:
            self.floors.check_eps_local(task.eps_local)
            rng, budget, drop_at = await self._computing.run(
                functools.partial(self._prepare, user, task))
        except FedhhError as error:
            log.warning("cannot compute a report", extra={"user": user, "error": str(error)})
            self.stats.failed += 1
            await self._decline(user, identity, task, round_keys)
            return
        self._tell_past_codes(task)
        self._tell_unresolved(task)

        async def report() -> np.ndarray:
            # Made (and its spend recorded) once the round's config has passed the device's
            # checks: a round it refuses costs it nothing. In a worker thread: the budget is
            # fsynced before the report leaves the device, and the other simulated devices of
            # this process go on meanwhile (on the event loop, 250 devices' fsyncs ran one
            # after another while the CPU sat idle).
            ones = await asyncio.to_thread(budget.report, task,
                                           lambda: make_report(data, task, rng))
            self.stats.report_seconds.append(time.perf_counter() - started)
            return ones

        outcome = await run_secure_aggregation(
            self._aggregator(task, user), task, identity.key, round_keys,
            identity.coordinator_public, report, drop_at,
            self.stats, self.floors, public=identity.public, rng=self._jitter,
            transport=self.transport, opening=self._opening, computing=self._computing)
        if outcome == "completed":
            self.stats.completed += 1
        elif outcome == "dropped":
            self.stats.dropped += 1
        elif outcome == "late":
            self.stats.late += 1
        else:
            self.stats.failed += 1

    async def _decline(self, user: int, identity: Identity, task: pb.Task,
                       round_keys: RoundKeys) -> None:
        """Give up ``user``'s seat in the round of ``task``, refused before its report was
        prepared (``decline_round``); nothing where the task names no aggregator this fleet
        can dial (that refusal is the task's own, already counted)."""
        try:
            aggregator = self._aggregator(task, user)
        except FedhhError:
            return
        await decline_round(aggregator, task, identity.key, identity.public, round_keys,
                            identity.coordinator_public, self._jitter)

    def _prepare(self, user: int, task: pb.Task
                 ) -> tuple[RandomSource | np.random.Generator, DeviceBudget, Stage | None]:
        """What ``user`` needs for ``task`` before its report: its randomness, its budget (read
        from its file the first time) and the stage it drops out at, if any."""
        rng: RandomSource | np.random.Generator
        if self.seed is None:
            rng = SecureSource()
        else:
            rng = streams.device_stream(self.seed, task.round, user)
        return rng, self._budget(user), self.drop.stage_for(user, task, self.seed)

    def _budget(self, user: int) -> DeviceBudget:
        if user not in self._budgets:
            path = None if self.state_dir is None else self.state_dir / "budgets" / f"{user}.json"
            self._budgets[user] = DeviceBudget.load(path, self.floors.lifetime_eps_local,
                                                    self.floors.budget_period_s)
        return self._budgets[user]

    def _aggregator(self, task: pb.Task, user: int) -> SecureAggregationStub | Any:
        """What ``user`` reaches the task's aggregator through: its framed session port's
        channel where the task names one and this fleet speaks it (the gRPC stub its
        fallback), else a gRPC stub (or what ``channel_factory`` makes)."""
        stub = self._channel(task.aggregator_address, user, self.channel_factory)
        if task.aggregator_session_address and self.session_factory is not None:
            session_factory = self.session_factory
            return self._channel(task.aggregator_session_address, user,
                                 lambda address: session_factory(address, stub))
        return stub

    def _channel(self, address: str, user: int, factory: Callable[[str], Any]) -> Any:
        key = (address, self._connection[user])
        if key not in self._aggregators:
            channel = factory(address)
            stub = (SecureAggregationStub(channel) if isinstance(channel, grpc.aio.Channel)
                    else channel)
            self._aggregators[key] = (channel, stub)
        return self._aggregators[key][1]

    async def close(self) -> None:
        if self._relay is not None:
            self._relay.cancel()
        for channel, _ in self._aggregators.values():
            await channel.close()

    async def _pause(self, seconds: float) -> None:
        """``seconds``, or until ``stop`` is set."""
        if self.stop.is_set():
            return
        if self._relay is None:
            self._relay = asyncio.create_task(self._relay_stop())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), seconds)

    async def _relay_stop(self) -> None:
        await self.stop.wait()
        self._stopped.set()

    def _stub(self, user: int) -> Any:
        """The coordinator (or selector) stub ``user`` asks now."""
        return self.stubs[(user + self._moved.get(user, 0)) % len(self.stubs)]

    def _next_stub(self, user: int) -> None:
        """``user``'s coordinator did not answer: ask the next one from now on."""
        if len(self.stubs) > 1:
            self._moved[user] = self._moved.get(user, 0) + 1

    async def _retry(self, call: Callable[[], Any], user: int | None = None) -> Any:
        """``call()``, made again after a jittered exponential backoff while the service is
        unreachable, slow, or says to come back later (RESOURCE_EXHAUSTED: its enrolment
        rate limit, per peer address, which every device of one host or NAT shares; they
        stopped at the first refusal, so ``fedhh up`` with more than 2,000 users failed)."""
        failures = 0
        while True:
            try:
                return await call()
            except grpc.aio.AioRpcError as error:
                # Once stopping, a call that failed is not made again: the pause below returns
                # at once then, and the cancellation that should end this loop can be lost
                # (asyncio.wait_for in Python 3.11 drops it when its waiter is done too).
                if self.stop.is_set() or error.code() not in _RETRIED:
                    raise
                if user is not None and error.code() == grpc.StatusCode.UNAVAILABLE:
                    self._next_stub(user)
                await self._pause(retry_pause(error.code(), failures, self._jitter))
                failures += 1
