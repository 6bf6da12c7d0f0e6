"""A device's SecAgg+ session at its aggregator as one stream (``SecureAggregation.Session``).

:func:`participate_stream` is :func:`fedhh.rpc.device_client.participate` over the stream: the
same stages, outcomes and robustness, with one stream where the unary path makes five calls
and long-polls. The aggregator sends a fresh challenge; the device opens the stream by signing
it (``aggregator_wire.session_open``; its round keys, the admission's, advertised in the open
where the challenge offers it, else in a ``keys`` message after it), and then each stage's message
as soon as the state machine has computed it; the aggregator pushes each next request (or
NOT_SELECTED, CLOSED, ABORTED) the moment it is known. Nothing polls, and no call times out to
be made again: the device only waits, up to ``overrun_s`` past the previous stage's deadline,
as the unary path does.

A stream that breaks (UNAVAILABLE, or CANCELLED when gRPC sheds it, or a worker that
restarted) is opened again with :class:`~fedhh.rpc.device_client.RetryPolicy`'s jittered
backoff, beyond its attempts while the device's current stage is open (``patient_until``, the
lesson of the 50,000-device load test in ``device_client``'s docstring), and the device's last
message is sent again marked ``resent``: an identical duplicate, or, if its stage has closed
since, the aggregator answers with the stage after it (READY if an earlier copy got in).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import random
import time
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.aggregator_wire import (
    CHALLENGE_BYTES,
    CHUNK_BYTES,
    keys_to_pb,
    request_from_pb,
    session_open,
    session_shares,
    session_unmask,
    shares_from_pb,
    stage_to_pb,
    unmask_answer_from,
    unmask_from_pb,
)
from fedhh.rpc.errors import CODES_BY_NUMBER
from fedhh.rpc.participation import (
    RETRIED_CODES,
    ComputeTurns,
    ParticipationEnd,
    RetryPolicy,
    RoundOver,
    SessionResult,
    computed_in_turn,
    ended_by_status,
    given_up,
    not_ready,
)
from fedhh.secagg import (
    ConsistencyRequest,
    MaskedInputRequest,
    SecAggAbort,
    SecAggDevice,
    ShareKeysRequest,
    Stage,
    UnmaskRequest,
)
from fedhh.secagg.config import Admission
from fedhh.v1 import aggregator_pb2 as pb

__all__ = ["SessionStream", "participate_stream"]

# What ``observe`` calls each stage's exchange on the stream (its message sent, the answer
# received): the name of the unary call that does the same (each of which waits for the next
# request), so that reports compare the two transports stage by stage.
_AS_CALLS = {Stage.SHARE_KEYS: "SubmitShares", Stage.MASKED_INPUT: "SubmitMaskedVector",
             Stage.CONSISTENCY_CHECK: "SubmitConsistency", Stage.UNMASK: "SubmitUnmask"}



def _unpacked(message: pb.SessionMessage, device: SecAggDevice) -> pb.SessionMessage:
    """``message`` with its shares one message each, if they were packed."""
    part = message.WhichOneof("part")
    if part == "shares" and message.shares.dsts:
        return session_shares(shares_from_pb(device.device_id, message.shares,
                                             device.session_id), False)
    if part == "unmask" and (message.unmask.b_owners or message.unmask.s_owners):
        return session_unmask(unmask_from_pb(device.device_id, message.unmask,
                                             device.session_id), False)
    return message


class _Broken(Exception):
    """The stream ended without the answer the device waits for (transient: open another)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class _Ended(Exception):
    """The stream ended with a final status (not retried), or the device's wait ran out."""

    def __init__(self, code: grpc.StatusCode | None, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _failed(error: grpc.aio.AioRpcError) -> _Broken | _Ended:
    code = error.code()
    return (_Broken if code in RETRIED_CODES else _Ended)(code, str(error.details()))


class SessionStream:
    """One device's stream in one round, opened again when it breaks; ``last`` (the
    messages of its latest submission) is sent again, marked ``resent``, on each new one."""

    def __init__(self, stub: Any, device: SecAggDevice, identity_key: Ed25519PrivateKey,
                 admission: Admission, retry: RetryPolicy, rng: random.Random, ends_at: float,
                 observe: Callable[[str, float, int], None] | None,
                 opening: asyncio.Semaphore | None = None) -> None:
        self.stub = stub
        self.device = device
        self.identity_key = identity_key
        self.admission = admission
        self.retry = retry
        self.rng = rng
        self.ends_at = ends_at  # Unix time: the stream's own gRPC deadline
        self.observe = observe
        # Held from a stream's start until its open is written: the streams of many devices
        # in one process (a fleet's) that wait for their challenge's answer at once.
        self.opening = opening
        self.patient_until = 0.0  # as DeviceSession.patient_until
        self.last: list[pb.SessionMessage] = []  # the latest submission's messages
        self.attempted = False  # some of them may have reached the aggregator on a stream
        self.packed_shares = False  # the open stream's aggregator takes the shares packed
        self.call: Any = None
        self._failures = 0  # consecutive broken streams (reset by an answer)

    # -- the stream and its reopening ----------------------------------------------------------

    async def _open(self) -> None:
        async with self.opening or contextlib.nullcontext():
            await self._open_now()

    async def _open_now(self) -> None:
        started = time.perf_counter()
        call = self.stub.Session(timeout=max(1.0, self.ends_at - time.time()))
        self.call = call
        try:
            event = await call.read()
        except grpc.aio.AioRpcError as error:
            raise _failed(error) from None
        if event is grpc.aio.EOF or event.WhichOneof("event") != "challenge" or len(
                event.challenge) != CHALLENGE_BYTES:
            call.cancel()
            raise _Ended(grpc.StatusCode.INTERNAL, "the stream did not start with a challenge")
        self.packed_shares = event.packed_shares
        if not self.packed_shares and self.last:  # (packed for an aggregator that offered it)
            self.last[0] = _unpacked(self.last[0], self.device)
        opened = pb.SessionMessage(open=session_open(
            self.identity_key, self.admission, self.device.session_id, event.challenge))
        opened.open.unmask_in_status = True  # (an aggregator from before it sends the event)
        opened.open.packed_requests = True  # (an aggregator from before it sends entries)
        opened.open.survivor_bits = True  # (an aggregator from before it sends the ids)
        if (event.keys_in_open and not self.attempted and self.last
                and self.last[0].WhichOneof("part") == "keys"):
            # (the keys ride in the open; a stream opened after this one sends them again as
            # a resent keys message, since they may have got in)
            opened.open.advertise = True
            self.attempted = True
        try:
            await call.write(opened)
            if self.attempted and not opened.open.advertise:  # (they may have got in: the
                # aggregator is told so)
                self.last[0].resent = True
                try:
                    for message in self.last:
                        await call.write(message)
                finally:
                    self.last[0].resent = False
        except grpc.aio.AioRpcError as error:
            raise self._write_failed(error) from None
        except asyncio.InvalidStateError:
            raise await self._ended() from None
        if self.observe is not None:
            self.observe("Session.open", time.perf_counter() - started, opened.ByteSize())

    async def _answer_in_status(self) -> pb.SessionEvent | None:
        """The answer to the unmask shares where the stream ended with it (status OK and its
        trailing metadata, ``SessionOpen.unmask_in_status``), as the event it stands for; only
        once they were sent (before, the end is a broken stream like any other). The stream
        is then done: a finished call reads EOF at once, every time, without yielding, so a
        caller that asked again would spin."""
        if not self.last or self.last[0].WhichOneof("part") != "unmask":
            return None
        if await self.call.code() != grpc.StatusCode.OK:
            return None
        accepted = unmask_answer_from(await self.call.trailing_metadata())
        if accepted is None:
            return None
        self.call = None
        return pb.SessionEvent(unmask=pb.SubmitResponse(accepted=accepted))

    async def _ended(self) -> _Broken | _Ended:
        """Why the stream (done, or half-closed) ended."""
        code = await self.call.code()
        if code == grpc.StatusCode.OK:
            return _Broken(code, "the stream ended early")
        return (_Broken if code in RETRIED_CODES else _Ended)(code, str(await self.call.details()))

    @staticmethod
    def _write_failed(error: grpc.aio.AioRpcError) -> _Broken | _Ended:
        """Why a write failed. grpc.aio fails a write on a stream whose end reached it
        meanwhile as INTERNAL, whatever the aggregator's code was (grpc/grpc#36066), and the
        call's status is then INTERNAL too: the aggregator's code is lost. The stream has
        ended; open another (within the retry policy, or while the stage is open), which
        either gets in or reads the refusal as its event. (The aggregator ends a stream whose
        open came too late, UNAVAILABLE: a device whose event loop was busy, thousands of
        simulated devices in one process starting a round at once, met this.)"""
        if error.code() == grpc.StatusCode.INTERNAL:
            return _Broken(error.code(), f"the stream ended during a write: {error.details()}")
        return _failed(error)

    async def _recover(self, broken: _Broken) -> None:
        """Back off, then open a new stream (raising ``broken`` as final once the retries are
        spent and the device's stage has closed)."""
        if self.call is not None:
            self.call.cancel()
            self.call = None
        patient = time.time() < self.patient_until
        if self._failures + 1 >= self.retry.attempts and not patient:
            raise _Ended(broken.code, broken.details)
        pause = self.retry.backoff(self._failures, self.rng)
        await asyncio.sleep(pause)
        self._failures += 1
        if self.observe is not None:  # (a load test counts the streams opened again)
            self.observe("Session.reopen", pause, 0)

    async def _ensure_open(self) -> None:
        while self.call is None:
            try:
                await self._open()
            except _Broken as broken:
                await self._recover(broken)

    def close(self) -> None:
        """Leave the stream (the aggregator forgets it at once)."""
        if self.call is not None:
            self.call.cancel()
            self.call = None

    # -- sending and receiving ---------------------------------------------------------------

    async def send(self, messages: list[pb.SessionMessage]) -> None:
        """A stage's message(s); a stream opened after they were (perhaps partly) written
        sends them again, the first marked ``resent``. The keys message (stage 0) goes in the
        open where the aggregator offers it."""
        self.last, self.attempted = messages, False
        while True:
            await self._ensure_open()
            if self.attempted:
                return  # (the new stream has sent them)
            self.attempted = True
            failure: _Broken | _Ended
            try:
                for message in messages:
                    await self.call.write(message)
                return
            except grpc.aio.AioRpcError as error:
                failure = self._write_failed(error)
            except asyncio.InvalidStateError:
                failure = await self._ended()
            if isinstance(failure, _Ended):
                raise failure
            await self._recover(failure)

    async def event(self, give_up_at: float) -> pb.SessionEvent:
        """The aggregator's next event, waiting until ``give_up_at`` (Unix time) at most."""
        while True:
            await self._ensure_open()
            try:
                async with asyncio.timeout(max(0.0, give_up_at - time.time())):
                    event = await self.call.read()
            except TimeoutError:
                raise _Ended(None, "no request before the previous stage's deadline") from None
            except grpc.aio.AioRpcError as error:
                failure = _failed(error)
                if isinstance(failure, _Ended):
                    raise failure from None
                await self._recover(failure)
                continue
            if event is grpc.aio.EOF:
                answer = await self._answer_in_status()
                if answer is not None:
                    return answer
                await self._recover(_Broken(grpc.StatusCode.OK, "the stream ended early"))
                continue
            if event.WhichOneof("event") == "refused":
                code = CODES_BY_NUMBER.get(event.refused.code, grpc.StatusCode.UNKNOWN)
                kind = _Broken if code in RETRIED_CODES else _Ended
                refused = kind(code, event.refused.details)
                if isinstance(refused, _Ended):
                    raise refused
                await self._recover(refused)
                continue
            self._failures = 0
            return event


async def participate_stream(stub: Any, device: SecAggDevice, ones: np.ndarray, *,
                             identity_key: Ed25519PrivateKey, admission: Admission,
                             drop_at: Stage | None, retry: RetryPolicy, overrun_s: float,
                             chunk_bytes: int, rng: random.Random,
                             observe: Callable[[str, float, int], None] | None,
                             opening: asyncio.Semaphore | None = None,
                             computing: ComputeTurns | None = None) -> SessionResult:
    """``participate`` over the session stream (its arguments, checked by it; ``ones`` the
    checked report's indices)."""
    stages = [Stage.SHARE_KEYS, Stage.MASKED_INPUT]
    if device.config.consistency_check:
        stages.append(Stage.CONSISTENCY_CHECK)
    stages.append(Stage.UNMASK)
    stream = SessionStream(stub, device, identity_key, admission, retry, rng,
                           device.config.deadlines.at_s(Stage.UNMASK) + overrun_s, observe, opening)
    current, contributed, uploaded = Stage.ADVERTISE_KEYS, False, False
    # The stage whose message the aggregator has not answered yet: a refusal that ends the
    # stream meanwhile is that message's (it comes while the device waits for the next stage's
    # request, where ``current`` has moved on), as the unary calls' submission reports it.
    unanswered: Stage | None = None
    sent_at, sent_bytes, sent_as = 0.0, 0, ""

    def observed() -> None:
        if observe is not None:
            observe(sent_as, time.perf_counter() - sent_at, sent_bytes)

    try:
        if drop_at == Stage.ADVERTISE_KEYS:
            return SessionResult(current, ParticipationEnd.DROPPED)
        stream.patient_until = device.config.deadlines.at_s(Stage.ADVERTISE_KEYS)
        keys = pb.SessionMessage(keys=keys_to_pb(device.advertise_keys()))
        sent_at, sent_bytes, sent_as = time.perf_counter(), keys.ByteSize(), "AdvertiseKeys"
        await stream.send([keys])
        previous = unanswered = Stage.ADVERTISE_KEYS
        for stage in stages:
            current = stage
            give_up_at = device.config.deadlines.at_s(previous) + overrun_s
            stream.patient_until = give_up_at
            wanted = stage_to_pb(stage)
            while True:
                event = await stream.event(give_up_at)
                if event.WhichOneof("event") == "unmask":  # (only the last message has one)
                    stream.close()
                    return SessionResult(stage, ParticipationEnd.REJECTED, contributed,
                                         "an unmask answer before the unmask shares")
                if event.WhichOneof("event") == "next" and event.stage == wanted:
                    break  # (anything else is a repeat for a stage already answered)
            unanswered = None
            observed()
            # The aggregator answers a message only once it accepted it (or an identical
            # copy): the masked input is in, as a unary call's answer would have said.
            contributed = uploaded
            if drop_at == stage:  # (silent before its message, as the unary path is)
                stream.close()
                return SessionResult(stage, ParticipationEnd.DROPPED, contributed)
            answer = event.next
            if answer.status != pb.AWAIT_STATUS_READY:
                stream.close()
                if answer.status == pb.AWAIT_STATUS_ABORTED and computing is not None:
                    computing.round_aborted(device.session_id, answer.abort_reason or "aborted")
                return not_ready(stage, answer.status, answer.abort_reason, contributed)
            stream.patient_until = device.config.deadlines.at_s(stage)
            try:
                messages = await computed_in_turn(computing, functools.partial(
                    _answer, device, answer, ones, chunk_bytes, stream.packed_shares),
                    device.session_id)
            except RoundOver as over:  # (told to another device of this process meanwhile)
                stream.close()
                return SessionResult(stage, ParticipationEnd.ROUND_ABORTED, contributed,
                                     f"{over.reason} (told to another device of this process)")
            if messages is None:
                stream.close()
                return SessionResult(stage, ParticipationEnd.REJECTED, contributed,
                                     "an answer without a request")
            # (a parsed event holds its wire bytes, the share-keys one tens of KiB: not kept
            # while the device waits a whole stage for the next; ``messages`` are, to resend)
            del event, answer
            sent_at, sent_bytes = time.perf_counter(), sum(m.ByteSize() for m in messages)
            sent_as = _AS_CALLS[stage] if len(messages) == 1 else "SubmitMaskedInput"
            await stream.send(messages)
            uploaded = uploaded or stage == Stage.MASKED_INPUT
            previous = unanswered = stage
        while True:
            event = await stream.event(device.config.deadlines.at_s(Stage.UNMASK) + overrun_s)
            if event.WhichOneof("event") == "unmask":
                break
        observed()
        stream.close()
        return SessionResult(Stage.DONE, ParticipationEnd.COMPLETED, contributed)
    except SecAggAbort as abort:
        stream.close()
        return SessionResult(current, ParticipationEnd.DEVICE_ABORTED, contributed, str(abort))
    except _Ended as ended:
        stream.close()
        if ended.code is None:
            return given_up(SessionResult(current, ParticipationEnd.TIMED_OUT, contributed,
                                          ended.details), computing, device.session_id)
        return ended_by_status(current if unanswered is None else unanswered, ended.code,
                               ended.details, contributed, computing, device.session_id)


def _answer(device: SecAggDevice, answer: pb.AwaitStageResponse, ones: np.ndarray,
            chunk_bytes: int, packed: bool) -> list[pb.SessionMessage] | None:
    """The messages that answer the request in ``answer`` (None if it holds none)."""
    request = request_from_pb(device.session_id, device.device_id, answer)
    if isinstance(request, ShareKeysRequest):
        return [session_shares(device.share_keys(request), packed)]
    if isinstance(request, MaskedInputRequest):
        return _vector_messages(device.masked_input(request, ones).vector_bytes(), chunk_bytes)
    if isinstance(request, ConsistencyRequest):
        return [pb.SessionMessage(
            consistency_signature=device.consistency_check(request).signature)]
    if isinstance(request, UnmaskRequest):
        return [session_unmask(device.unmask(request), packed)]
    return None


def _vector_messages(data: bytes, chunk_bytes: int) -> list[pb.SessionMessage]:
    """A masked vector as the stream carries it: its length, hash and first chunk, then the
    rest in chunks of at most ``chunk_bytes``."""
    step = min(chunk_bytes, CHUNK_BYTES)
    first = pb.SessionMessage()
    first.masked_vector.total_bytes = len(data)
    first.masked_vector.vector_sha256 = hashlib.sha256(data).digest()
    first.masked_vector.data = data[:step]
    return [first, *(pb.SessionMessage(vector_data=data[offset:offset + step])
                     for offset in range(step, len(data), step))]

