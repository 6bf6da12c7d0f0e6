"""A device's whole session as one stream (``SecureAggregation.Session``).

The stream is authenticated once: the aggregator's first event is a fresh random challenge,
and the device's first message (``open``) carries its admission and its identity key's
signature over ``aggregator_wire.session_transcript(session_id, device_id, challenge)``. Every
later message on the stream is taken as the admitted device's without a signature: only the
two ends of the device's TLS connection can read or write a stream's messages, and the
challenge, fresh for this stream, was readable only by the end that then signed it
(docs/secagg.md, "The session stream", argues it in full).

The challenge event says ``keys_in_open``: a device may then mark its open ``advertise``, and
the admission's round keys (proved by the open's signature and the admission's Merkle proof)
are its stage 0 message, one message fewer per device; devices that do not mark it send a
``keys`` message as before.

After the open the device sends each stage's message as it computes it; each is handled as the
unary call for that stage handles it (the same checks in the same order, the same state
machine, the same codes) and, but for the unmask shares, answered by pushing the device's
request for the stage after it (or NOT_SELECTED, CLOSED, ABORTED) as soon as it is known: no
long-polls. The unmask shares are answered with ``unmask`` and the stream ends; a device whose
open asked for it (``unmask_in_status``) takes that answer from the stream's end instead, status
OK with trailing metadata, one message fewer per device. A device whose open says
``packed_requests`` gets its masked-input request's shares packed (the senders, then their
ciphertexts), which the worker writes without an entry per share; one whose open says
``survivor_bits`` gets the survivor set U3 as a bitmap (3 KB at a shard of 25,000 where the
ids take 53). A rejected
message changes nothing and ends the stream with its code, told first in a ``refused`` event
(see :func:`_refuse`).

One stream per device and round: a newer authenticated stream replaces the older, which ends
ALREADY_EXISTS (a device opens a new stream only after its old one broke, so the old one is a
half-open leftover the aggregator had not noticed yet; refusing the new one instead would lock
the device out until then). A device that reconnects sends its last message again marked
``resent``: an identical duplicate, answered with the next stage's request, or, if that
message's stage has closed since, with what its stage after says (READY if an earlier copy
got in, NOT_SELECTED if none did), as a repeated unary submission is; if its stage has not
started (the aggregator recovered to an earlier one), it is refused FAILED_PRECONDITION.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import time
from collections.abc import Callable

import grpc

from fedhh.errors import AuthenticationError, ConflictError, FedhhError, StateError
from fedhh.rpc.aggregator_wire import (
    CHALLENGE_BYTES,
    CHUNK_BYTES,
    RequestForm,
    admission_from_pb,
    keys_from_pb,
    session_transcript,
    shares_from_pb,
    stage_to_pb,
    unmask_answer_metadata,
    unmask_from_pb,
)
from fedhh.rpc.errors import details_of, status_of
from fedhh.rpc.request_waits import RequestWaits
from fedhh.secagg import (
    AdvertiseKeys,
    ConsistencyResponse,
    ProtocolViolation,
    Stage,
    Violation,
)
from fedhh.secagg.config import Admission
from fedhh.secagg.primitives import ed25519_verify
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator import metrics
from fedhh_aggregator.device_messages import (
    accept_vector,
    await_response,
    check_share_count,
    declared_upload,
    malformed,
)
from fedhh_aggregator.errors import OpenTimeout, SessionsBusy, UploadTimeout
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.rounds import Round

__all__ = ["parse_message", "run_session"]

_BYTES_RECEIVED = metrics.BYTES_RECEIVED.labels("Session")


def parse_message(data: bytes) -> pb.SessionMessage:
    """A device's session message from its bytes on the wire, counted as received there (both
    ports parse with this). Counting the parsed message instead (``ByteSize``) encoded it
    again: upb has no size function, so each device's shares and vector were serialized once
    more only to be counted."""
    _BYTES_RECEIVED.inc(len(data))
    return pb.SessionMessage.FromString(data)


# What a read or write raises once the stream's call has ended under its handler: its client
# cancelled or left mid-stream (gRPC's core then refuses the operation: ExecuteBatchError, a
# grpc.aio.InternalError, while the handler is not yet cancelled), or the stream ended (the
# framed port's InvalidStateError, gRPC's AbortError and UsageError). Nobody is left to tell.
# Before, the core's refusal of a refusal or a pushed request was logged at ERROR with its
# traceback ("unexpected error in DeviceServicer.Session"), as a bug, each time a client
# cancelled as its stream was refused: anyone could, before the open.
_ENDED = (grpc.aio.AbortError, grpc.aio.UsageError, grpc.aio.InternalError,
          asyncio.InvalidStateError)


class _Reader:
    """The device's messages, each waited for at most so long. (A read that runs out of time
    is cancelled, which ends the call's reading: a refusal after it is still delivered, but
    its wait for the device to close its side ends at once.)"""

    def __init__(self, context: grpc.aio.ServicerContext, unopened: RequestWaits) -> None:
        self.context = context
        self._unopened: RequestWaits | None = unopened  # (its place, until the open is read)

    def opened(self) -> None:
        """The device's first message was read (or the stream ends): its place is given back."""
        if self._unopened is not None:
            self._unopened.release()
            self._unopened = None

    async def next(self, timeout_s: float, late: Callable[[], FedhhError]
                   ) -> pb.SessionMessage | None:
        """The next message (None once the device closed its side), or the error ``late()``
        makes raised after ``timeout_s``.

        The error is made here, not passed in: a frame holding the exception it raises is a
        reference cycle with that exception's traceback, and under the services' collector
        settings (``serving.tune_gc``) such garbage waits for an old generation's pass, so
        unopened streams, each timing out so, grew a worker by gigabytes."""
        try:
            async with asyncio.timeout(max(0.0, timeout_s)):
                message = await self.context.read()
        except TimeoutError:
            raise late() from None
        return None if message is grpc.aio.EOF else message


async def run_session(registry: RoundRegistry, context: grpc.aio.ServicerContext,
                      port: str = "grpc") -> None:
    """Serve one session stream (the servicer's ``Session``, or a stream of the framed session
    port, ``port`` "framed", whose stream stands in for the context; errors become its status,
    told first in a ``refused`` event)."""
    metrics.SESSIONS_OPENED.labels(port).inc()
    unopened = registry.unopened
    if not unopened.take():
        raise SessionsBusy(f"busy: {unopened.limit} session streams wait for their devices' "
                           f"opens here; retry after a backoff")
    reader = _Reader(context, unopened)
    try:
        challenge = os.urandom(CHALLENGE_BYTES)
        wait_s = registry.limits.upload_idle_s
        try:  # (a client that does not read holds no handler: the open's grace bounds it)
            async with asyncio.timeout(wait_s):
                await context.write(pb.SessionEvent(challenge=challenge, keys_in_open=True,
                                                    packed_shares=True))
        except TimeoutError:
            raise OpenTimeout(f"the challenge was not taken within {wait_s:g} s") from None
        try:
            await _serve(registry, context, reader, challenge)
        except FedhhError as error:
            await _refuse(context, reader, error, registry.limits.upload_idle_s)
            raise
    except grpc.aio.InternalError:
        return  # (a read or write the core refused: the call has ended, _ENDED)
    finally:
        reader.opened()


async def _refuse(context: grpc.aio.ServicerContext, reader: _Reader, error: FedhhError,
                  wait_s: float) -> None:
    """Tell the device why its stream ends, then wait (at most ``wait_s``) for it to close its
    side, ignoring what it still sends: ending the stream while a client's write is in flight
    would show it INTERNAL instead of this code (grpc/grpc#36066)."""
    refusal = pb.SessionEvent()
    refusal.refused.code = status_of(error).value[0]
    refusal.refused.details = details_of(error)
    until = time.monotonic() + wait_s
    try:
        await asyncio.wait_for(context.write(refusal), wait_s)
        while await reader.next(until - time.monotonic(), _StopWaiting) is not None:
            pass
    except (FedhhError, TimeoutError, *_ENDED):
        pass


class _StopWaiting(FedhhError):
    """A refused stream's device did not close its side in time (``_refuse``)."""


async def _serve(registry: RoundRegistry, context: grpc.aio.ServicerContext, reader: _Reader,
                 challenge: bytes) -> None:
    limits = registry.limits
    first = await reader.next(limits.upload_idle_s, lambda: OpenTimeout(
        f"no open within {limits.upload_idle_s:g} s of the challenge: open a new stream"))
    reader.opened()
    if first is None:
        return
    session, advertised = _authenticate(registry, context, reader, challenge, first)
    # (not ``first``, a parsed message holding its wire bytes, for the stream's whole life)
    del first
    await session.run(advertised)


def _authenticate(registry: RoundRegistry, context: grpc.aio.ServicerContext, reader: _Reader,
                  challenge: bytes, first: pb.SessionMessage
                  ) -> tuple[_Session, Admission | None]:
    """The stream's session from the device's first message, which must be an ``open``
    signed by an admitted device over this stream's challenge, and the open's admission when
    it is the device's stage 0 message too (``SessionOpen.advertise``)."""
    if first.WhichOneof("part") != "open":
        raise malformed("a session stream starts with open")
    opened = first.open
    round_ = registry.by_session(bytes(opened.session_id))
    if not opened.HasField("admission"):
        raise AuthenticationError("missing device credentials")
    admission = admission_from_pb(opened.admission)
    if not round_.admitted(admission):
        raise AuthenticationError("the admission is not the coordinator's for this round")
    transcript = session_transcript(round_.session_id, admission.device_id, challenge)
    if not ed25519_verify(admission.identity_key, bytes(opened.signature), transcript):
        raise AuthenticationError("the stream is not opened by the admitted device")
    session = _Session(registry, round_, admission, context, reader, opened.unmask_in_status,
                       RequestForm.of(opened))
    return session, admission if opened.advertise else None


class _Session:
    """One authenticated stream: the reader (this task) and at most one pusher task."""

    def __init__(self, registry: RoundRegistry, round_: Round, admission: Admission,
                 context: grpc.aio.ServicerContext, reader: _Reader,
                 unmask_in_status: bool, request_form: RequestForm) -> None:
        self.registry = registry
        self.unmask_in_status = unmask_in_status
        self.request_form = request_form
        self.reader = reader
        self.round = round_
        self.device_id = admission.device_id
        self.context = context
        self.task = asyncio.current_task()
        self.stop_error: FedhhError | None = None  # why another task ended this stream
        self._pusher: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()
        # Messages after the last stage's deadline are late whatever they are; the stream
        # waits no longer than that (plus the upload grace) for the device's next message.
        self._ends_at = (round_.config.deadlines.at_s(Stage.UNMASK)
                         + registry.limits.upload_idle_s)

    def stop(self, error: FedhhError) -> None:
        """End this stream with ``error``'s status (from another task)."""
        if self.stop_error is None and self.task is not None:
            self.stop_error = error
            self.task.cancel()

    async def run(self, advertised: Admission | None) -> None:
        """Serve the stream; ``advertised``: the open's admission when its round keys are the
        device's stage 0 message (``SessionOpen.advertise``)."""
        streams = self.round.streams
        older = streams.get(self.device_id)
        if older is not None:
            older.stop(ConflictError(f"replaced by a newer session stream of device "
                                     f"{self.device_id}"))
        streams[self.device_id] = self
        metrics.SESSION_STREAMS.inc()
        try:
            if advertised is not None:  # (only a first open is so marked: no repeat to answer)
                await self.round.submit(Stage.ADVERTISE_KEYS, AdvertiseKeys(
                    self.round.session_id, self.device_id, advertised.c_pk, advertised.s_pk,
                    advertised))
                self._push(self.round.stage_after(Stage.ADVERTISE_KEYS))
            # One deadline for all the stage messages (a timeout per read cost as much as
            # the rest of the read's Python): the last stage's, after which anything is late,
            # a message still being handled then too (its stage has closed: StateError).
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout_at(loop.time() + self._ends_at - time.time()):
                    while True:
                        message = await self.context.read()
                        if message is grpc.aio.EOF or await self._handle(message):
                            return
                        # A parsed message holds its wire bytes: kept while the stream
                        # waits for the next, every device's shares (~10 KB) and then its
                        # masked vector (~17 KB) made up two fifths of a worker's heap.
                        del message
            except TimeoutError:
                raise StateError("every stage of the round has closed") from None
        except asyncio.CancelledError:
            if self.stop_error is None:
                raise
            if self.task is not None:
                self.task.uncancel()
            raise self.stop_error from None
        finally:
            metrics.SESSION_STREAMS.dec()
            if self._pusher is not None:
                self._pusher.cancel()
            if streams.get(self.device_id) is self:
                del streams[self.device_id]

    async def _handle(self, message: pb.SessionMessage) -> bool:
        """One device message; True once the stream is done (the unmask shares answered)."""
        round_, device_id = self.round, self.device_id
        part = message.WhichOneof("part")
        stage: Stage
        try:
            if part == "keys":
                stage = Stage.ADVERTISE_KEYS
                keys = keys_from_pb(round_.session_id, message.keys)
                admission = keys.admission
                if (keys.device_id != device_id or admission is None
                        or admission.device_id != device_id or not round_.admitted(admission)):
                    raise AuthenticationError("the keys are not this stream's device's")
                await round_.submit(stage, keys)
            elif part == "shares":
                stage = Stage.SHARE_KEYS
                check_share_count(round_, message.shares)
                await round_.submit(stage, shares_from_pb(device_id, message.shares,
                                                          round_.session_id))
            elif part == "masked_vector":
                stage = Stage.MASKED_INPUT
                await self._masked_vector(message.masked_vector)
            elif part == "consistency_signature":
                stage = Stage.CONSISTENCY_CHECK
                await round_.submit(stage, ConsistencyResponse(
                    round_.session_id, device_id, bytes(message.consistency_signature)))
            elif part == "unmask":
                check_share_count(round_, message.unmask)
                accepted = await round_.submit(Stage.UNMASK, unmask_from_pb(
                    device_id, message.unmask, round_.session_id))
                if self.unmask_in_status:
                    self.context.set_trailing_metadata(unmask_answer_metadata(accepted))
                else:
                    await self._write(pb.SessionEvent(
                        unmask=pb.SubmitResponse(accepted=accepted)))
                return True
            elif part == "open":
                raise malformed("a session stream is opened once")
            elif part == "vector_data":
                raise malformed("vector data outside a masked vector")
            else:
                raise malformed("an empty session message")
        except StateError:
            # A message sent again after a reconnect whose stage closed meanwhile may have got
            # in on the broken stream: the stage after it tells (as for a unary repeat). One
            # whose stage has not started (an aggregator recovered to an earlier stage) is
            # refused as any early message is: the stage after it would never be answered.
            if not message.resent or part == "unmask" or round_.stage < stage:
                raise
        self._push(round_.stage_after(stage))
        return False

    async def _masked_vector(self, vector: pb.SessionVector) -> None:
        """Stage 2 with the unary upload's checks: the declared length and hash first, then
        the bytes (the first in ``vector``, any more in ``vector_data`` messages, each within
        ``upload_idle_s`` and all at ``upload_min_rate``), which must hash as declared."""
        round_ = self.round
        declared = declared_upload(round_, vector.total_bytes, vector.vector_sha256)

        async def receive(expected: int) -> tuple[bytes | bytearray, bytes]:
            data = vector.data
            if not 0 < len(data) <= min(expected, CHUNK_BYTES):
                raise ProtocolViolation(Violation.WRONG_LENGTH, f"the vector's first part "
                                        f"holds 1..{min(expected, CHUNK_BYTES)} bytes, got "
                                        f"{len(data)}")
            if len(data) == expected:
                return data, hashlib.sha256(data).digest()
            return await self._rest(data, expected)

        await accept_vector(self.registry, round_, self.device_id, declared, receive)

    async def _rest(self, first: bytes, expected: int) -> tuple[bytearray, bytes]:
        limits = self.registry.limits
        buffer = bytearray(expected)
        buffer[:len(first)] = first
        digest = hashlib.sha256(first)
        received = len(first)
        loop = asyncio.get_running_loop()
        idle = limits.upload_idle_s
        until = loop.time() + idle + expected / limits.upload_min_rate
        while received < expected:
            wait = min(idle, until - loop.time())
            message = await self.reader.next(wait, functools.partial(UploadTimeout, (
                f"upload slower than {limits.upload_min_rate} bytes/s" if wait < idle else
                f"no upload data for {idle:g} s")))
            if message is None:
                raise ProtocolViolation(Violation.WRONG_LENGTH, f"the stream ended after "
                                        f"{received} of the vector's {expected} bytes")
            if message.WhichOneof("part") != "vector_data":
                raise malformed("only vector data may follow a masked vector's first part")
            data = message.vector_data
            if not 0 < len(data) <= min(CHUNK_BYTES, expected - received):
                raise ProtocolViolation(Violation.WRONG_LENGTH, f"vector data holds 1.."
                                        f"{min(CHUNK_BYTES, expected - received)} bytes here, "
                                        f"got {len(data)}")
            buffer[received:received + len(data)] = data
            digest.update(data)
            received += len(data)
        return buffer, digest.digest()

    # -- pushing the next request ------------------------------------------------------------

    def _push(self, stage: Stage) -> None:
        """Push this device's answer for ``stage`` once known (replacing an earlier push)."""
        if self._pusher is not None:
            self._pusher.cancel()
        self._pusher = asyncio.create_task(self._push_when_ready(stage))

    async def _push_when_ready(self, stage: Stage) -> None:
        round_ = self.round
        try:
            # (untimed: a wait capped at max_wait_s woke every waiting pusher once a cap while
            # a stage stayed open, for nothing: no device polls the stream)
            outcome = await round_.await_request(self.device_id, stage, None)
            event: pb.SessionEvent | Callable[[], bytes]
            if outcome.request is not None:
                event = functools.partial(round_.encoder.event, stage, outcome.request,
                                          self.request_form)
            else:
                event = pb.SessionEvent(stage=stage_to_pb(stage))
                await_response(round_, outcome, event.next)
            await self._write(event)
        except FedhhError as error:
            self.stop(error)
        except _ENDED:
            pass  # the stream has ended meanwhile

    async def _write(self, event: pb.SessionEvent | Callable[[], bytes]) -> None:
        """Write one event; a function that encodes it is called by the port when it writes it
        (``fedhh.rpc.serving.response_bytes``): on the framed port once the connection's turn
        comes to it, so a stage's requests are not all held encoded while devices read the
        first ones."""
        async with self._writing:
            await self.context.write(event)

