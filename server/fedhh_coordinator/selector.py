"""A selector's side of the selector tier (docs/scaling.md, "Selectors"; the leader's side is
``fedhh_coordinator.hub``).

``SelectorLobby`` stands where the coordinator's ``Lobby`` stands for the device service: a
device's GetTask waits there, with the same answers (its task, or "none" once), but the
check-ins are the leader's. The lobby forwards, in batches, each device's new round keys and its
joining of the check-in the leader announced, and answers its waiting devices from the leader's
messages: the tasks of its members (the last message of a check-in marked, after which the
others hear "none"), a refusal (the keys belong to another device), or the round's end.

``LeaderLink`` keeps the one stream to the leader (the selector token as bearer, over TLS),
reconnecting with backoff; while it is down no device joins a check-in here (they are told
"none" and ask again, here or at another selector), and every key is presented again once it
is back, to a leader that may have restarted. A leader that refuses the selector ends the link
(``LeaderRefused``): its token and name do not change while it runs. It checks the leader's
tasks against the coordinator key it hands devices at enrollment, as the stream opens (the
leader signs the selector's challenge: ``check_key_proof``) and in every task message
(``check_signed_by``): devices that hold another key reject every task, so a selector given
the wrong one stops (``WrongCoordinatorKey``) before it enrolls a device that could never take
part."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable

import grpc
from google.protobuf.message import DecodeError

from fedhh.backoff import Backoff
from fedhh.errors import ConfigError, FedhhError
from fedhh.rpc.credentials import bearer_metadata
from fedhh.rpc.crowd_event import CrowdEvent
from fedhh.rpc.tasks import COHORT_TASK_CONTEXT
from fedhh.secagg.config import RoundConfig, SecAggConfigError
from fedhh.secagg.primitives import ed25519_verify
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.hub import CHALLENGE_BYTES, LEADER_TIME_KEY, MAX_BATCH, attach_transcript
from fedhh_coordinator.lobby import wait_out_held_task

log = logging.getLogger(__name__)

# How long a selector gathers check-ins before it sends them: a round's devices arrive within
# seconds, so 20 ms costs nothing and makes one message of hundreds of check-ins.
BATCH_DELAY_S = 0.02
# The leader's answers that end a selector (a wrong token, a request it refuses): no try
# again changes them, where any other ends the stream and the selector attaches again.
LEADER_REFUSALS = frozenset({grpc.StatusCode.UNAUTHENTICATED,
                             grpc.StatusCode.INVALID_ARGUMENT})


class WrongCoordinatorKey(FedhhError):
    """The leader's tasks are not signed by the key this selector gives its devices."""


class LeaderRefused(FedhhError):
    """The leader refused this selector (UNAUTHENTICATED: not its selector token, or it has
    none; INVALID_ARGUMENT: its name): asking again with the same token and name would be
    refused for ever, an error logged every few seconds while the selector never serves."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


def check_signed_by(tasks: pb.SelectorTasks, coordinator_public: bytes) -> None:
    """Raise WrongCoordinatorKey unless the shared part of ``tasks``' first task verifies
    under ``coordinator_public`` (a cohort's members share that part and its signature,
    ``fedhh.rpc.tasks``, so one check answers for the message)."""
    for signed in tasks.tasks.values():
        shared = signed.task[:signed.shared_length]
        if not ed25519_verify(coordinator_public, signed.shared_signature,
                              COHORT_TASK_CONTEXT + shared):
            raise WrongCoordinatorKey("the leader's tasks do not verify under the coordinator "
                                      "key this selector gives its devices")
        return


def first_deadline_ms(tasks: pb.SelectorTasks) -> int | None:
    """The first stage's deadline (Unix ms) of the round ``tasks`` are for, read from the
    signed round config of one of them (a cohort shares it); None if it cannot be read (the
    devices judge such a task themselves)."""
    for signed in tasks.tasks.values():
        try:
            task = pb.Task.FromString(signed.task)
            return RoundConfig.from_bytes(task.round_config).deadlines.advertise_keys
        except (DecodeError, SecAggConfigError):
            return None
    return None


def leader_unix_s(metadata: Iterable[tuple[str, str | bytes]] | None) -> float | None:
    """The leader's clock (Unix s) its stream's initial metadata tells (``LEADER_TIME_KEY``),
    or None where it tells none that reads as one (a leader older than the telling)."""
    for key, value in metadata or ():
        if key == LEADER_TIME_KEY:
            text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
            if text.isascii() and text.isdigit() and len(text) <= 15:
                return int(text) / 1000
    return None


def check_key_proof(proof: bytes, challenge: bytes, name: str,
                    coordinator_public: bytes) -> None:
    """Raise WrongCoordinatorKey unless the leader's ``proof`` verifies under the key this
    selector gives its devices (``fedhh_coordinator.hub.attach_transcript``): checked as the
    stream opens, before any device enrolls here."""
    if not ed25519_verify(coordinator_public, proof, attach_transcript(challenge, name)):
        raise WrongCoordinatorKey("the leader does not hold the coordinator key this selector "
                                  "gives its devices")


class SelectorLobby:
    """Where a selector's devices wait for tasks (module docstring)."""

    def __init__(self) -> None:
        self.connected = False
        self.checkin = 0
        self._open = False
        self._pool: dict[int, asyncio.Future[pb.SignedTask | None]] = {}
        self._sent: dict[int, tuple[bytes, bytes]] = {}  # keys the leader has heard
        self._refused: dict[int, tuple[tuple[bytes, bytes], str]] = {}
        self._presented: list[pb.CheckIn] = []
        self._joined: list[pb.CheckIn] = []
        self.pending = asyncio.Event()  # something to send
        self._opened = CrowdEvent()
        self._closed = CrowdEvent()
        self._cleared = CrowdEvent()
        self._acks: list[int] = []  # check-ins whose last tasks arrived, to tell the leader
        self.clock = time.time  # (Unix s: this selector's, read only where the leader's is unknown)
        self.monotonic = time.monotonic
        # The leader's clock (Unix s) as the stream opened, and this selector's monotonic clock
        # then (``leader_now``); None: not told (a leader older than the telling).
        self._leader: tuple[float, float] | None = None

    # ---- devices ---------------------------------------------------------------------------
    async def wait_for_task(self, device_id: int, round_keys: tuple[bytes, bytes], wait_s: float,
                            known: bytes = b"") -> pb.SignedTask | None:
        """As ``Lobby.wait_for_task``: the device's task, joining the open check-in."""
        self._check_refused(device_id, round_keys)
        seat = self._pool.get(device_id)
        left = await wait_out_held_task(seat, known, self._cleared, wait_s,
                                        lambda: self._pool.get(device_id) is seat)
        if left is None:
            return None
        loop = asyncio.get_running_loop()
        wait_s, until = left, loop.time() + left
        future = self._pool.get(device_id)
        if future is None:
            if not self._open and self.connected and self._sent.get(device_id) != round_keys:
                self._queue(self._presented, device_id, round_keys)
            if not self._open:
                # (timeouts around the waits, not wait_for: that made a task more of every
                # device's wait for the opening, and a timer and callbacks more of each wait)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._opened.wait()
            if not (self._open and self.connected):
                return None
            future = loop.create_future()
            self._pool[device_id] = future
            self._queue(self._joined, device_id, round_keys)
        try:
            async with asyncio.timeout_at(until):
                task = await asyncio.shield(future)
        except TimeoutError:
            return None
        self._check_refused(device_id, round_keys)
        return task

    def _check_refused(self, device_id: int, round_keys: tuple[bytes, bytes]) -> None:
        refusal = self._refused.get(device_id)
        if refusal is not None and refusal[0] == round_keys:
            raise ConfigError(refusal[1])

    def _queue(self, into: list[pb.CheckIn], device_id: int, keys: tuple[bytes, bytes]) -> None:
        self._sent[device_id] = keys
        into.append(pb.CheckIn(device_id=device_id, c_pk=keys[0], s_pk=keys[1]))
        self.pending.set()

    def take_batch(self) -> pb.SelectorBatch | None:
        """The next batch to send (at most ``MAX_BATCH`` devices; or a check-in's tasks
        acknowledged: its id and no device, ``fedhh_coordinator.hub``), or None."""
        if self._acks:
            return pb.SelectorBatch(checkin=self._acks.pop(0))
        if not (self._presented or self._joined):
            self.pending.clear()
            return None
        joined, self._joined = self._joined[:MAX_BATCH], self._joined[MAX_BATCH:]
        room = MAX_BATCH - len(joined)
        presented, self._presented = self._presented[:room], self._presented[room:]
        return pb.SelectorBatch(checkin=self.checkin if joined else 0, presented=presented,
                                joined=joined)

    # ---- the leader ------------------------------------------------------------------------
    def handle(self, message: pb.LeaderMessage) -> None:
        event = message.WhichOneof("event")
        if event == "opened":
            self._end_round()
            self.checkin = message.opened
            self._open = True
            self._closed = CrowdEvent()
            self._opened.set()
            log.info("check-in opened", extra={"checkin": self.checkin})
        elif event == "closed":
            if message.closed == self.checkin:
                self._close()
        elif event == "tasks":
            tasks = message.tasks
            if tasks.checkin != self.checkin:
                return
            if tasks.last:
                self._acks.append(tasks.checkin)
                self.pending.set()
            first = first_deadline_ms(tasks)
            if first is not None and self.leader_now() * 1000 >= first:
                # This selector was stopped (SIGSTOP, swapped out) while the leader sent them:
                # their round's first stage is over, and its attempt aborted or goes on without
                # them. Before, they were handed out late, to devices that could only miss it;
                # now the devices hear "none" and join the next check-in.
                log.warning(f"the tasks of check-in {tasks.checkin} came "
                            f"{self.leader_now() - first / 1000:.1f} s after their round's first "
                            "deadline: not handed out", extra={"checkin": tasks.checkin})
                self._end_round()
                return
            for device_id, task in tasks.tasks.items():
                future = self._pool.get(device_id)
                if future is not None and not future.done():
                    future.set_result(task)
            if tasks.last:
                log.info("tasks delivered", extra={
                    "checkin": self.checkin, "pool": len(self._pool),
                    "members": sum(1 for f in self._pool.values()
                                   if f.done() and f.result() is not None)})
                self._close()
                for future in self._pool.values():
                    if not future.done():
                        future.set_result(None)
        elif event == "refused":
            device_id = message.refused.device_id
            keys = self._sent.get(device_id)
            if keys is not None:
                self._refused[device_id] = (keys, message.refused.reason)
            future = self._pool.pop(device_id, None)
            if future is not None and not future.done():
                future.set_result(None)
        elif event == "cleared" and message.cleared == self.checkin:
            self._end_round()

    def attached(self, leader_unix_s: float | None = None) -> None:
        """The stream to the leader is open; ``leader_unix_s``: the leader's clock, as it told
        as the stream opened (None: it told none)."""
        self.connected = True
        self._leader = None if leader_unix_s is None else (leader_unix_s, self.monotonic())

    def leader_now(self) -> float:
        """Now on the leader's clock (Unix s), on which the deadlines of its tasks are set: what
        it told as the stream opened, plus the time since on this selector's monotonic clock
        (a selector stopped meanwhile, SIGSTOP or swapped out, sees that time pass). Before,
        the deadlines were read on the selector's own clock: one minutes ahead of the
        leader's handed out no task (each came "after its round's first deadline"), one
        behind handed out the tasks of rounds already under way. This selector's own clock
        where the leader told none."""
        if self._leader is None:
            return self.clock()
        told, at = self._leader
        return told + self.monotonic() - at

    def detached(self) -> None:
        """The stream is gone: waiting devices hear "none"; the keys are presented again."""
        self.connected = False
        self._end_round()
        self._sent = {}
        self._refused = {}
        self._presented, self._joined, self._acks = [], [], []
        self.pending.clear()

    def _close(self) -> None:
        if self._open:
            self._open = False
            self._closed.set()
            self._opened = CrowdEvent()

    def _end_round(self) -> None:
        self._close()
        for future in self._pool.values():
            if not future.done():
                future.set_result(None)
        self._pool = {}
        self._joined = []
        self._cleared.set()
        self._cleared = CrowdEvent()

    @property
    def pool_size(self) -> int:
        return len(self._pool)


class LeaderLink:
    """The selector's stream to the leader (module docstring)."""

    def __init__(self, lobby: SelectorLobby, channel: grpc.aio.Channel, token: bytes,
                 name: str, coordinator_public: bytes,
                 on_link: Callable[[bool], Awaitable[None]] | None = None) -> None:
        self.lobby = lobby
        self.coordinator_public = coordinator_public  # the key devices enrolled here get
        self.stub = pb_grpc.SelectorControlStub(channel)
        self.metadata = bearer_metadata(token)
        self.name = name
        self.attached = asyncio.Event()  # set once the leader first answered
        # Told True on each attach and False on each loss (selector_main.link_health: the
        # device service's gRPC health, which readiness reads).
        self._on_link = on_link
        self._linked = False
        self._jitter = random.Random()

    @property
    def linked(self) -> bool:
        """Whether the stream to the leader is attached now."""
        return self._linked

    async def _tell(self, linked: bool) -> None:
        if linked != self._linked:
            self._linked = linked
            if self._on_link is not None:
                await self._on_link(linked)

    async def serve(self) -> None:
        # (0.2 s doubling to 7.5 s, full jitter: at most 7.5 s, which with a channel's
        # reconnection fits the hold a restarted leader keeps for its returning devices,
        # lobby.RETURN_S)
        backoff = Backoff(0.2, 7.5, self._jitter)
        while True:
            try:
                await self._attach()
                backoff.reset()
            except grpc.aio.AioRpcError as error:
                if error.code() in LEADER_REFUSALS:
                    log.error("the leader refused this selector",
                              extra={"code": error.code().name, "details": error.details()})
                    raise LeaderRefused(error.code(), error.details() or "") from None
                log.warning("lost the leader", extra={"code": error.code().name})
            finally:
                self.lobby.detached()
                await self._tell(False)
            await asyncio.sleep(backoff.pause())

    async def _attach(self) -> None:
        call = self.stub.Attach(metadata=self.metadata)
        challenge = secrets.token_bytes(CHALLENGE_BYTES)
        await call.write(pb.SelectorBatch(name=self.name, challenge=challenge))
        leader_time = leader_unix_s(await call.initial_metadata())
        first = await call.read()
        if first is grpc.aio.EOF:
            return
        if first.WhichOneof("event") == "key_proof":  # (a leader before them sends none)
            check_key_proof(first.key_proof, challenge, self.name, self.coordinator_public)
            first = await call.read()
            if first is grpc.aio.EOF:
                return
        self.lobby.attached(leader_time)
        self._handle(first)
        self.attached.set()
        await self._tell(True)
        log.info("attached to the leader", extra={"selector": self.name})
        writer = asyncio.create_task(self._write(call))
        try:
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    return
                self._handle(message)
        finally:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await writer
            call.cancel()

    def _handle(self, message: pb.LeaderMessage) -> None:
        # Before the lobby hands the tasks out (WrongCoordinatorKey ends serve(), and its
        # devices waiting here hear "none").
        if message.WhichOneof("event") == "tasks":
            check_signed_by(message.tasks, self.coordinator_public)
        self.lobby.handle(message)

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            await self.lobby.pending.wait()
            await asyncio.sleep(BATCH_DELAY_S)  # gather a batch
            while (batch := self.lobby.take_batch()) is not None:
                await call.write(batch)
