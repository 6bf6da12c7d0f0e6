"""A device's client of the secure-aggregation service (grpc.aio).

Device (one call per device per round; many may share a channel)::

    # round_keys: the RoundKeys whose public halves the device presented at check-in
    signed = SignedConfig(task.round_config, task.round_config_signature)
    admission = Admission(task.secagg_id, identity_public_bytes, *round_keys.public,
                          task.admission)
    device = SecAggDevice(signed, coordinator_public, task.secagg_id, identity_key=key,
                          admission=admission, round_keys=round_keys,
                          policy=DevicePolicy(require_device_auth=True))
    outcome = await participate(channel, device, ones, identity_key=key, admission=admission)
    # ones: sorted indices of the randomized report's 1 bits (InvalidReport if not a 0/1
    # vector of the round's dimension, raised before anything is sent)

:func:`participate` runs every stage: AdvertiseKeys; then for each later stage this device's
request, the library's answer, and its submission (the masked vector streamed in chunks of at
most 1 MiB). Each submission but the last asks the aggregator to long-poll for the next request
in the same call (``wait_next_ms``); AwaitStage is called only when that answer was PENDING.
UNAVAILABLE and CANCELLED are retried with jittered exponential backoff: every device call is
safe to repeat (AwaitStage only reads, and a retried submission is an identical duplicate, which
the aggregator ignores). CANCELLED is what gRPC
core answers for a call it shed from an overfull backlog before any handler ran; a call this
process cancels raises ``asyncio.CancelledError`` instead, which is never retried.
DEADLINE_EXCEEDED (an aggregator too starved to answer within the call's timeout) is asked again,
and UNAVAILABLE and CANCELLED retried beyond the policy's attempts, while the stage the call
belongs to is open (``DeviceSession.patient_until``): a 50,000-device load test lost half its
devices when five shed attempts in about four seconds ended them. A repeated submission that
finds its stage closed (an earlier attempt may have got in, its answer lost) does not end the
device: it asks for its next request, which tells (READY if it got in, NOT_SELECTED if not).
It never raises for protocol or transport outcomes: it returns a :class:`SessionResult` saying
where the device stopped and why. ``drop_at=Stage.X`` makes it stop silently before sending
stage X's message (dropout injection for tests).

That is the unary path (``transport=Transport.UNARY``), which the Connect port's devices use.
Over a gRPC channel or stub the default is the session stream
(:mod:`fedhh.rpc.device_stream`): the same stages and outcomes in one stream per device and
round, the next request pushed by the aggregator as soon as it is known.
"""


from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import grpc
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.rpc.aggregator_wire import (
    CHUNK_BYTES,
    CallKind,
    await_digest,
    consistency_digest,
    credentials,
    header_digest,
    keys_to_pb,
    request_from_pb,
    shares_digest,
    shares_to_pb,
    stage_to_pb,
    unmask_digest,
    unmask_to_pb,
    upload_seconds,
)
from fedhh.rpc.device_stream import participate_stream
from fedhh.rpc.framed.client import FramedStub
from fedhh.rpc.participation import (
    RETRIED_CODES,
    ComputeTurns,
    ParticipationEnd,
    RetryPolicy,
    RoundOver,
    SessionResult,
    Transport,
    computed_in_turn,
    ended_by_status,
    given_up,
    not_ready,
)
from fedhh.secagg import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencyResponse,
    MaskedInput,
    MaskedInputRequest,
    SecAggAbort,
    SecAggDevice,
    ServerMessage,
    ShareKeysRequest,
    ShareKeysResponse,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
    check_report,
)
from fedhh.secagg.config import Admission
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

__all__ = ["DeviceSession", "ParticipationEnd", "RetryPolicy", "SessionResult", "Transport",
           "decline", "participate"]

T = TypeVar("T")
# One long-poll's answer: (AwaitStatus value, the request if READY, the abort reason).
Awaited = tuple[int, "ServerMessage | None", str]


@dataclass
class DeviceSession:
    """One device's calls in one round, each signed with its identity key and retried on
    UNAVAILABLE and CANCELLED. :func:`participate` drives these; tests call them one by one."""

    stub: Any  # pb_grpc.SecureAggregationStub
    device: SecAggDevice
    identity_key: Ed25519PrivateKey
    admission: Admission
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    call_timeout: float = 30.0
    chunk_bytes: int = CHUNK_BYTES
    rng: random.Random = field(default_factory=random.Random)
    # Told of every call when it ends: (RPC name, seconds including retries, request bytes).
    observe: Callable[[str, float, int], None] | None = None
    # Until this Unix time a call that ran out of time (DEADLINE_EXCEEDED: an aggregator too
    # starved to answer within call_timeout) is made again, and a shed or unavailable one is
    # retried beyond ``retry.attempts`` (backoff capped at ``retry.max_backoff_s``);
    # participate() sets it to the deadline of the stage the call belongs to. 0: neither.
    patient_until: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.chunk_bytes <= CHUNK_BYTES:
            raise ConfigError(f"chunk_bytes must be in [1, {CHUNK_BYTES}], got {self.chunk_bytes}")
        self.session_id = self.device.session_id
        # The next-stage answer of the last submission sent with wait_next_ms (take_next()).
        self._next: Awaited | None = None

    def take_next(self) -> Awaited | None:
        """What the last submission's ``wait_next_ms`` long-poll answered (once), or None."""
        awaited, self._next = self._next, None
        return awaited

    def _submitted(self, response: pb.SubmitResponse) -> bool:
        self._next = (self._awaited(response.next) if response.HasField("next") else None)
        return bool(response.accepted)

    def _awaited(self, response: pb.AwaitStageResponse) -> Awaited:
        message = request_from_pb(self.session_id, self.device.device_id, response)
        return int(response.status), message, str(response.abort_reason)

    def _timeout(self, wait_next_ms: int, upload: int = 0) -> float:
        """A call's deadline: its answer's hold, ``call_timeout``, and for a body of ``upload``
        bytes the time the aggregator gives it (upload_seconds). Before, a masked vector had
        the hold and call_timeout alone, so one of 4 MiB (D = 2^20) over a 1 Mbit/s link was
        cut by the device's own deadline at 30 s and sent again, whole, until its stage
        closed: the device never contributed."""
        return (wait_next_ms / 1000 + self.call_timeout
                + (upload_seconds(upload) if upload else 0.0))

    def _creds(self, kind: CallKind, digest: bytes) -> pb.DeviceCredentials:
        return credentials(self.identity_key, self.admission, kind, self.session_id, digest)

    async def _retrying(self, call: Callable[[], Awaitable[T]], name: str, size: int, *,
                        closed_since: Callable[[], T] | None = None) -> T:
        """``call()``, made again as the class docstring says. ``closed_since``: what a
        repeated call returns when the stage has closed since an earlier attempt
        (FAILED_PRECONDITION), which may have been accepted with its answer lost."""
        started = time.perf_counter()
        try:
            attempt, repeated = 0, False
            while True:
                try:
                    return await call()
                except grpc.aio.AioRpcError as error:
                    # (Every device call is idempotent: a repeated message is an identical
                    # duplicate, so asking again is safe whatever the first call did.)
                    if (repeated and closed_since is not None
                            and error.code() == grpc.StatusCode.FAILED_PRECONDITION):
                        # Only the next stage's request can tell whether an earlier attempt
                        # got in: on a starved machine, a 50,000-device load test lost
                        # two in five of its devices to a late answer here.
                        return closed_since()
                    repeated = True
                    patient = time.time() < self.patient_until
                    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and patient:
                        continue
                    # A call shed or refused by an overloaded aggregator is retried
                    # ``retry.attempts`` times, or for as long as its stage is open.
                    if error.code() not in RETRIED_CODES or (attempt + 1 >= self.retry.attempts
                                                        and not patient):
                        raise
                await asyncio.sleep(self.retry.backoff(attempt, self.rng))
                attempt += 1
        finally:
            if self.observe is not None:
                self.observe(name, time.perf_counter() - started, size)

    async def _submit(self, call: Callable[[], Awaitable[pb.SubmitResponse]], name: str,
                      size: int) -> bool:
        """A submission that has a next stage: True if accepted now. A repeat refused because
        the stage closed meanwhile counts as not accepted, with no next request in hand, so
        the device asks for its next request: READY if an earlier attempt got in,
        NOT_SELECTED if none did."""
        return self._submitted(await self._retrying(call, name, size,
                                                    closed_since=pb.SubmitResponse))

    async def advertise(self, message: AdvertiseKeys, wait_next_ms: int = 0) -> bool:
        request = pb.AdvertiseKeysRequest(session_id=self.session_id, keys=keys_to_pb(message),
                                          wait_next_ms=wait_next_ms)
        return await self._submit(
            lambda: self.stub.AdvertiseKeys(request, timeout=self._timeout(wait_next_ms)),
            "AdvertiseKeys", request.ByteSize())

    async def await_request(self, stage: Stage, wait_ms: int) -> Awaited:
        """One long-poll: (AwaitStatus value, the request if READY, the abort reason)."""
        request = pb.AwaitStageRequest(
            session_id=self.session_id, credentials=self._creds(CallKind.AWAIT,
                                                                await_digest(stage)),
            stage=stage_to_pb(stage), wait_ms=max(0, wait_ms))
        response = await self._retrying(lambda: self.stub.AwaitStage(
            request, timeout=self._timeout(wait_ms)), "AwaitStage", request.ByteSize())
        return self._awaited(response)

    async def submit_shares(self, message: ShareKeysResponse, wait_next_ms: int = 0) -> bool:
        request = shares_to_pb(message, self._creds(CallKind.SHARES, shares_digest(message)))
        request.wait_next_ms = wait_next_ms
        return await self._submit(
            lambda: self.stub.SubmitShares(request, timeout=self._timeout(wait_next_ms)),
            "SubmitShares", request.ByteSize())

    async def submit_masked_input(self, message: MaskedInput, wait_next_ms: int = 0) -> bool:
        data = message.vector_bytes()
        vector_sha256 = hashlib.sha256(data).digest()
        creds = self._creds(CallKind.MASKED_INPUT, header_digest(len(data), vector_sha256))
        header = pb.MaskedInputHeader(session_id=self.session_id, credentials=creds,
                                      total_bytes=len(data), wait_next_ms=wait_next_ms,
                                      vector_sha256=vector_sha256)
        step = self.chunk_bytes
        if len(data) <= step:  # one message: the unary call costs less than a stream
            vector = pb.MaskedVector(header=header, data=data)
            return await self._submit(
                lambda: self.stub.SubmitMaskedVector(
                    vector, timeout=self._timeout(wait_next_ms, len(data))),
                "SubmitMaskedVector", vector.ByteSize())

        async def chunks() -> AsyncIterator[pb.MaskedInputChunk]:
            yield pb.MaskedInputChunk(header=header)
            for offset in range(0, len(data), step):
                yield pb.MaskedInputChunk(data=data[offset:offset + step])

        return await self._submit(
            lambda: self.stub.SubmitMaskedInput(
                chunks(), timeout=self._timeout(wait_next_ms, len(data))),
            "SubmitMaskedInput", header.ByteSize() + len(data))

    async def submit_consistency(self, message: ConsistencyResponse, wait_next_ms: int = 0
                                 ) -> bool:
        request = pb.SubmitConsistencyRequest(
            session_id=self.session_id, signature=message.signature,
            credentials=self._creds(CallKind.CONSISTENCY, consistency_digest(message)),
            wait_next_ms=wait_next_ms)
        return await self._submit(
            lambda: self.stub.SubmitConsistency(request, timeout=self._timeout(wait_next_ms)),
            "SubmitConsistency", request.ByteSize())

    async def submit_unmask(self, message: UnmaskResponse) -> bool:
        request = unmask_to_pb(message, self._creds(CallKind.UNMASK, unmask_digest(message)))
        response = await self._retrying(
            lambda: self.stub.SubmitUnmask(request, timeout=self.call_timeout),
            "SubmitUnmask", request.ByteSize())
        return bool(response.accepted)


# How long past the previous stage's deadline a device waits for a stage's request (by its
# own clock) before it gives up on the round.
OVERRUN_S = 30.0


async def decline(channel: grpc.aio.Channel | Any, session_id: bytes, *,
                  identity_key: Ed25519PrivateKey, admission: Admission,
                  retry: RetryPolicy | None = None, call_timeout: float = 30.0,
                  rng: random.Random | None = None) -> bool:
    """Give up this device's seat in round ``session_id`` before it advertises its keys
    (``SecureAggregation.Decline``, signed as the admitted device), so that the round's first
    stage stops waiting for it instead of running to its deadline. ``channel``: as
    :func:`participate` takes it (a framed session port's stub sends it over its fallback).
    True once the aggregator has it (a repeat's answer too); False when it could not be told:
    an aggregator older than the call (UNIMPLEMENTED), one unreachable through ``retry``'s
    attempts, a stage closed already. The round then goes on without the device at the
    deadline, as it did before devices could decline. Never raises for the call's outcome."""
    stub = (pb_grpc.SecureAggregationStub(channel) if isinstance(channel, grpc.aio.Channel)
            else channel)
    request = pb.DeclineRequest(session_id=session_id, credentials=credentials(
        identity_key, admission, CallKind.DECLINE, session_id, b""))
    retry, rng = retry or RetryPolicy(), rng or random.Random()
    for attempt in range(retry.attempts):
        try:
            await stub.Decline(request, timeout=call_timeout)
            return True
        except grpc.aio.AioRpcError as error:
            if error.code() not in RETRIED_CODES or attempt + 1 >= retry.attempts:
                return False
        await asyncio.sleep(retry.backoff(attempt, rng))
    return False


async def participate(channel: grpc.aio.Channel | Any, device: SecAggDevice, ones: np.ndarray,
                      *, identity_key: Ed25519PrivateKey, admission: Admission,
                      drop_at: Stage | None = None, poll_ms: int = 55_000,
                      retry: RetryPolicy | None = None, call_timeout: float = 30.0,
                      overrun_s: float = OVERRUN_S, chunk_bytes: int = CHUNK_BYTES,
                      rng: random.Random | None = None,
                      observe: Callable[[str, float, int], None] | None = None,
                      transport: Transport | str | None = None,
                      opening: asyncio.Semaphore | None = None,
                      computing: ComputeTurns | None = None) -> SessionResult:
    """Run one device through a round (see the module docstring for the call sequence).

    ``channel`` is a ``grpc.aio.Channel`` or a ``SecureAggregationStub``; ``device`` a fresh
    :class:`SecAggDevice` built with ``identity_key`` and ``admission`` (the same two are needed
    here to sign each call). Long-polls ask for at most ``poll_ms`` each; the device gives up
    waiting for a stage's request ``overrun_s`` after the previous stage's deadline. A call
    that times out (an aggregator too busy to answer in ``call_timeout``) is made again until
    then, or for a submission until its stage's deadline: a starved aggregator slows a device
    down but does not drop it.
    ``observe(rpc, seconds, request_bytes)`` is told of each call as it ends (on the stream:
    of its opening and of each stage, from the message sent to the next request). Raises only
    :class:`~fedhh.secagg.InvalidReport` (bad ``ones``, before anything is sent).

    ``transport``: the session stream or the unary calls; by default the stream over a
    ``grpc.aio.Channel``, a ``SecureAggregationStub`` or a ``FramedStub`` (an aggregator's
    framed session port, ``fedhh.rpc.framed``), the unary calls over anything else
    shaped like a stub (a Connect stub, a test's wrapper of the unary methods). ``opening``:
    on the stream, a semaphore held from a stream's start until its open is written, shared
    by the devices of one process (:class:`~fedhh.rpc.device_stream.SessionStream`).
    ``computing``: the turns in which the devices of one process compute each stage's answer
    (:class:`~fedhh.rpc.participation.ComputeTurns`).
    """
    stub = (pb_grpc.SecureAggregationStub(channel) if isinstance(channel, grpc.aio.Channel)
            else channel)
    idx = check_report(ones, device.config.dimension)
    if transport is None:
        transport = (Transport.STREAM if isinstance(stub, (pb_grpc.SecureAggregationStub,
                                                           FramedStub))
                     else Transport.UNARY)
    if Transport(transport) is Transport.STREAM:
        if not 0 < chunk_bytes <= CHUNK_BYTES:
            raise ConfigError(f"chunk_bytes must be in [1, {CHUNK_BYTES}], got {chunk_bytes}")
        return await participate_stream(
            stub, device, idx, identity_key=identity_key, admission=admission,
            drop_at=drop_at, retry=retry or RetryPolicy(), overrun_s=overrun_s,
            chunk_bytes=chunk_bytes, rng=rng or random.Random(), observe=observe,
            opening=opening, computing=computing)
    session = DeviceSession(stub, device, identity_key, admission,
                            retry=retry or RetryPolicy(), call_timeout=call_timeout,
                            chunk_bytes=chunk_bytes, rng=rng or random.Random(),
                            observe=observe)
    stages = [Stage.SHARE_KEYS, Stage.MASKED_INPUT]
    if device.config.consistency_check:
        stages.append(Stage.CONSISTENCY_CHECK)
    stages.append(Stage.UNMASK)
    current, contributed, session_id = Stage.ADVERTISE_KEYS, False, device.session_id
    try:
        if drop_at == Stage.ADVERTISE_KEYS:
            return SessionResult(current, ParticipationEnd.DROPPED)
        # Each submission but the last also long-polls for the next request (wait_next_ms), so
        # a stage costs one call; AwaitStage follows only if that answer was not the request.
        session.patient_until = device.config.deadlines.at_s(Stage.ADVERTISE_KEYS)
        await session.advertise(device.advertise_keys(), poll_ms)
        previous = Stage.ADVERTISE_KEYS
        for stage in stages:
            current = stage
            if drop_at == stage:
                return SessionResult(stage, ParticipationEnd.DROPPED, contributed)
            give_up_at = device.config.deadlines.at_s(previous) + overrun_s
            session.patient_until = give_up_at
            request = await _wait_for_request(session, stage, give_up_at, poll_ms,
                                              session.take_next())
            if isinstance(request, SessionResult):
                if request.outcome is ParticipationEnd.ROUND_ABORTED and computing is not None:
                    computing.round_aborted(session_id, request.detail or "aborted")
                return given_up(SessionResult(stage, request.outcome, contributed,
                                              request.detail), computing, session_id)
            session.patient_until = device.config.deadlines.at_s(stage)
            wait_next = poll_ms if stage != Stage.UNMASK else 0
            if isinstance(request, ShareKeysRequest):
                shares = await computed_in_turn(
                    computing, partial(device.share_keys, request), session_id)
                await session.submit_shares(shares, wait_next)
            elif isinstance(request, MaskedInputRequest):
                vector = await computed_in_turn(
                    computing, partial(device.masked_input, request, idx), session_id)
                await session.submit_masked_input(vector, wait_next)
                contributed = True
            elif isinstance(request, ConsistencyRequest):
                signature = await computed_in_turn(
                    computing, partial(device.consistency_check, request), session_id)
                await session.submit_consistency(signature, wait_next)
            elif isinstance(request, UnmaskRequest):
                revealed = await computed_in_turn(
                    computing, partial(device.unmask, request), session_id)
                await session.submit_unmask(revealed)
            previous = stage
        return SessionResult(Stage.DONE, ParticipationEnd.COMPLETED, contributed)
    except SecAggAbort as abort:
        return SessionResult(current, ParticipationEnd.DEVICE_ABORTED, contributed, str(abort))
    except RoundOver as over:  # (told to another device of this process meanwhile)
        return SessionResult(current, ParticipationEnd.ROUND_ABORTED, contributed,
                             f"{over.reason} (told to another device of this process)")
    except grpc.aio.AioRpcError as error:
        return ended_by_status(current, error.code(), error.details(), contributed, computing,
                               session_id)


async def _wait_for_request(session: DeviceSession, stage: Stage, give_up_at: float,
                            poll_ms: int, first: Awaited | None = None
                            ) -> ServerMessage | SessionResult:
    """Long-poll until this device's request for ``stage`` (or a terminal answer); ``first``
    is an answer already in hand (from the previous submission's wait_next_ms)."""
    while True:
        if first is not None:
            (status, request, reason), first = first, None
        else:
            remaining_ms = int((give_up_at - time.time()) * 1000)
            if remaining_ms <= 0:
                return SessionResult(stage, ParticipationEnd.TIMED_OUT,
                                     detail="no request before the previous stage's deadline")
            status, request, reason = await session.await_request(stage,
                                                                  min(poll_ms, remaining_ms))
        if status == pb.AWAIT_STATUS_READY and request is not None:
            return request
        if status == pb.AWAIT_STATUS_PENDING:
            continue
        return not_ready(stage, status, reason)
