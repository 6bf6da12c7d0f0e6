"""The gRPC servicers: transport only. They authenticate, convert wire messages to
``fedhh.secagg`` messages and back, and hand them to the round registry; every domain error
becomes a status code in ``fedhh.rpc.errors.status_errors``."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import numpy as np

from fedhh.errors import AuthenticationError, StateError
from fedhh.rpc.aggregator_wire import (
    CHUNK_BYTES,
    CallKind,
    await_digest,
    consistency_digest,
    keys_from_pb,
    request_to_pb,
    shares_digest,
    shares_from_pb,
    stage_from_pb,
    unmask_digest,
    unmask_from_pb,
)
from fedhh.rpc.errors import status_errors
from fedhh.secagg import ConsistencyResponse, MaskedInput, ProtocolViolation, Stage, Violation
from fedhh.secagg.prg import mask_dtype
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator import metrics
from fedhh_aggregator.auth import (
    ControlAuth,
    authenticate_device,
    check_call,
    device_admission,
)
from fedhh_aggregator.errors import RoundAbortedError, UploadTimeout
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.rounds import AwaitOutcome, AwaitStatus, Round, RoundState

_AWAIT_STATUS = {
    AwaitStatus.READY: pb.AWAIT_STATUS_READY,
    AwaitStatus.PENDING: pb.AWAIT_STATUS_PENDING,
    AwaitStatus.NOT_SELECTED: pb.AWAIT_STATUS_NOT_SELECTED,
    AwaitStatus.CLOSED: pb.AWAIT_STATUS_CLOSED,
    AwaitStatus.ABORTED: pb.AWAIT_STATUS_ABORTED,
}
_STATE = {
    RoundState.RUNNING: pb.AGGREGATION_STATE_RUNNING,
    RoundState.RELEASED: pb.AGGREGATION_STATE_RELEASED,
    RoundState.ABORTED: pb.AGGREGATION_STATE_ABORTED,
}


def _malformed(detail: str) -> ProtocolViolation:
    return ProtocolViolation(Violation.MALFORMED, detail)


class DeviceServicer(pb_grpc.SecureAggregationServicer):
    """fedhh.v1.SecureAggregation: the protocol stages, for admitted devices."""

    def __init__(self, registry: RoundRegistry) -> None:
        self._registry = registry

    def _round(self, session_id: bytes, rpc: str, size: int) -> Round:
        metrics.BYTES_RECEIVED.labels(rpc).inc(size)
        return self._registry.by_session(bytes(session_id))

    @status_errors
    async def AdvertiseKeys(self, request: pb.AdvertiseKeysRequest,
                            context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        round_ = self._round(request.session_id, "AdvertiseKeys", request.ByteSize())
        if not request.HasField("keys"):
            raise _malformed("AdvertiseKeys needs the keys")
        message = keys_from_pb(round_.session_id, request.keys)
        admission = message.admission
        # The library then checks that the admission's keys are the advertised ones.
        if admission is None or admission.device_id != message.device_id or not round_.admitted(
                admission):
            raise AuthenticationError("the admission is not the coordinator's for this device")
        accepted = await round_.submit(Stage.ADVERTISE_KEYS, message)
        return await _submitted(round_, message.device_id, Stage.ADVERTISE_KEYS, accepted,
                                request.wait_next_ms)

    @status_errors
    async def AwaitStage(self, request: pb.AwaitStageRequest,
                         context: grpc.aio.ServicerContext) -> pb.AwaitStageResponse:
        round_ = self._round(request.session_id, "AwaitStage", request.ByteSize())
        stage = stage_from_pb(request.stage)
        if stage is None:
            raise _malformed(f"unknown stage {request.stage}")
        device_id = authenticate_device(round_, request.credentials, CallKind.AWAIT,
                                        await_digest(stage))
        return _await_response(await round_.await_request(device_id, stage,
                                                          request.wait_ms / 1000))

    @status_errors
    async def SubmitShares(self, request: pb.SubmitSharesRequest,
                           context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        round_ = self._round(request.session_id, "SubmitShares", request.ByteSize())
        admission = device_admission(round_, request.credentials)
        message = shares_from_pb(admission.device_id, request)
        device_id = check_call(round_, admission, request.credentials, CallKind.SHARES,
                               shares_digest(message))
        accepted = await round_.submit(Stage.SHARE_KEYS, message)
        return await _submitted(round_, device_id, Stage.SHARE_KEYS, accepted,
                                request.wait_next_ms)

    @status_errors
    async def SubmitMaskedInput(self, request: AsyncIterator[pb.MaskedInputChunk],
                                context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        chunks = aiter(request)
        first = await anext(chunks, None)
        if first is None or first.WhichOneof("part") != "header":
            raise _malformed("a masked input starts with its header")
        return await self._masked_input(first.header, first.ByteSize(),
                                        lambda expected: _receive(chunks, expected),
                                        "SubmitMaskedInput")

    @status_errors
    async def SubmitMaskedVector(self, request: pb.MaskedVector,
                                 context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        if not request.HasField("header"):
            raise _malformed("a masked vector needs its header")

        async def receive(expected: int) -> tuple[bytes, bytes]:
            data = request.data
            if len(data) != expected:
                raise ProtocolViolation(Violation.WRONG_LENGTH, f"got {len(data)} bytes, the "
                                        f"round's vectors have {expected}")
            return data, hashlib.sha256(data).digest()

        return await self._masked_input(request.header, request.header.ByteSize(), receive,
                                        "SubmitMaskedVector")

    async def _masked_input(self, header: pb.MaskedInputHeader, header_size: int,
                            receive: Callable[[int], Awaitable[tuple[bytes | bytearray, bytes]]],
                            rpc: str) -> pb.SubmitResponse:
        """Both forms of stage 2: ``receive(expected)`` returns exactly ``expected`` bytes of
        vector and their SHA-256, or raises."""
        round_ = self._round(header.session_id, rpc, header_size)
        admission = device_admission(round_, header.credentials)
        cfg = round_.config
        dtype = mask_dtype(cfg.modulus_bits)
        expected = cfg.dimension * dtype.itemsize
        if header.total_bytes != expected:
            raise ProtocolViolation(Violation.WRONG_LENGTH, f"declared {header.total_bytes} "
                                    f"bytes, the round's vectors have {expected}")
        # What the state machine would say after the upload, said before it (the stage only
        # moves forward): do not receive a vector that cannot be added.
        if round_.state == RoundState.ABORTED:
            raise RoundAbortedError(f"round aborted ({round_.abort_reason})")
        if round_.stage > Stage.MASKED_INPUT or round_.upload_deadline() <= 0:
            raise StateError("the masked-input stage has closed")
        try:
            async with asyncio.timeout(round_.upload_deadline()):
                async with self._registry.uploads:
                    metrics.UPLOADS_ACTIVE.inc()
                    try:
                        buffer, digest = await receive(expected)
                    finally:
                        metrics.UPLOADS_ACTIVE.dec()
        except TimeoutError:
            raise UploadTimeout("the upload did not finish before the stage's deadline") from None
        metrics.BYTES_RECEIVED.labels(rpc).inc(expected)
        device_id = check_call(round_, admission, header.credentials, CallKind.MASKED_INPUT,
                               digest)
        message = MaskedInput(round_.session_id, device_id, np.frombuffer(buffer, dtype=dtype))
        accepted = await round_.submit(Stage.MASKED_INPUT, message)
        del message, buffer  # the vector is in the sum (or rejected); drop it now
        return await _submitted(round_, device_id, Stage.MASKED_INPUT, accepted,
                                header.wait_next_ms)

    @status_errors
    async def SubmitConsistency(self, request: pb.SubmitConsistencyRequest,
                                context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        round_ = self._round(request.session_id, "SubmitConsistency", request.ByteSize())
        admission = device_admission(round_, request.credentials)
        message = ConsistencyResponse(round_.session_id, admission.device_id,
                                      bytes(request.signature))
        device_id = check_call(round_, admission, request.credentials, CallKind.CONSISTENCY,
                               consistency_digest(message))
        accepted = await round_.submit(Stage.CONSISTENCY_CHECK, message)
        return await _submitted(round_, device_id, Stage.CONSISTENCY_CHECK, accepted,
                                request.wait_next_ms)

    @status_errors
    async def SubmitUnmask(self, request: pb.SubmitUnmaskRequest,
                           context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        round_ = self._round(request.session_id, "SubmitUnmask", request.ByteSize())
        admission = device_admission(round_, request.credentials)
        message = unmask_from_pb(admission.device_id, request)
        check_call(round_, admission, request.credentials, CallKind.UNMASK,
                   unmask_digest(message))
        return pb.SubmitResponse(accepted=await round_.submit(Stage.UNMASK, message))


def _await_response(outcome: AwaitOutcome) -> pb.AwaitStageResponse:
    if outcome.request is not None:
        return request_to_pb(outcome.request)
    return pb.AwaitStageResponse(status=_AWAIT_STATUS[outcome.status],
                                 abort_reason=outcome.abort_reason)


async def _submitted(round_: Round, device_id: int, stage: Stage, accepted: bool,
                     wait_next_ms: int) -> pb.SubmitResponse:
    """The answer to a submission; with ``wait_next_ms``, also this device's next request (as
    AwaitStage would answer it after waiting up to that long)."""
    response = pb.SubmitResponse(accepted=accepted)
    if wait_next_ms > 0:
        outcome = await round_.await_request(device_id, round_.stage_after(stage),
                                             wait_next_ms / 1000)
        response.next.CopyFrom(_await_response(outcome))
    return response


async def _receive(chunks: AsyncIterator[pb.MaskedInputChunk], expected: int
                   ) -> tuple[bytearray, bytes]:
    """Exactly ``expected`` bytes from the data chunks, and their SHA-256."""
    buffer = bytearray(expected)
    view = memoryview(buffer)
    digest = hashlib.sha256()
    received = 0
    async for chunk in chunks:
        if chunk.WhichOneof("part") != "data":
            raise _malformed("only data chunks may follow the header")
        data = chunk.data
        if not 0 < len(data) <= CHUNK_BYTES:
            raise ProtocolViolation(Violation.WRONG_LENGTH,
                                    f"chunks hold 1..{CHUNK_BYTES} bytes, got {len(data)}")
        if received + len(data) > expected:
            raise ProtocolViolation(Violation.WRONG_LENGTH,
                                    f"more than the declared {expected} bytes")
        view[received:received + len(data)] = data
        digest.update(data)
        received += len(data)
    if received != expected:
        raise ProtocolViolation(Violation.WRONG_LENGTH,
                                f"got {received} bytes, the round's vectors have {expected}")
    return buffer, digest.digest()


class ControlServicer(pb_grpc.AggregatorControlServicer):
    """fedhh.v1.AggregatorControl: the coordinator's calls (bearer token on each)."""

    def __init__(self, registry: RoundRegistry, auth: ControlAuth) -> None:
        self._registry = registry
        self._auth = auth

    @status_errors
    async def OpenRound(self, request: pb.OpenRoundRequest,
                        context: grpc.aio.ServicerContext) -> pb.OpenRoundResponse:
        self._auth.check(context)
        round_, created = self._registry.open(bytes(request.config), bytes(request.signature))
        return pb.OpenRoundResponse(session_id=round_.session_id, created=created)

    @status_errors
    async def GetResult(self, request: pb.GetResultRequest,
                        context: grpc.aio.ServicerContext) -> None:
        self._auth.check(context)
        round_ = self._registry.by_round(bytes(request.round_id))
        state = await round_.wait_finished(request.wait_ms / 1000)
        cfg = round_.config
        header = pb.ResultHeader(state=_STATE[state], round_id=cfg.round_id,
                                 session_id=round_.session_id, dimension=cfg.dimension,
                                 modulus_bits=cfg.modulus_bits)
        if state == RoundState.RUNNING:
            await context.write(pb.ResultChunk(header=header))
            return
        if state == RoundState.ABORTED:
            header.abort_reason = round_.abort_reason
            await context.write(pb.ResultChunk(header=header))
            self._registry.forget(round_, "its abort was reported to the coordinator")
            return
        result = round_.result
        if result is None:
            raise StateError("the sum was already delivered")
        data = result.total.astype(mask_dtype(cfg.modulus_bits), copy=False).tobytes()
        header.num_contributors = result.num_contributors
        header.total_bytes = len(data)
        await context.write(pb.ResultChunk(header=header))
        for offset in range(0, len(data), CHUNK_BYTES):
            await context.write(pb.ResultChunk(data=data[offset:offset + CHUNK_BYTES]))
        # Every chunk was handed to the transport: the coordinator has the sum; forget it.
        self._registry.forget(round_, "the sum was delivered to the coordinator")
        metrics.ROUNDS_DELIVERED.inc()

    @status_errors
    async def CancelRound(self, request: pb.CancelRoundRequest,
                          context: grpc.aio.ServicerContext) -> pb.CancelRoundResponse:
        self._auth.check(context)
        state = await self._registry.cancel(bytes(request.round_id))
        return pb.CancelRoundResponse(state=_STATE[state])
