"""The gRPC servicers: transport only. They authenticate, convert wire messages to
``fedhh.secagg`` messages and back, and hand them to the round registry (the device calls) or
to the control handler the combiner shares (``fedhh_aggregator.control``, through
``control_wire.ControlCalls``); every domain error becomes a status code in
``fedhh.rpc.errors.status_errors``."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import grpc

from fedhh.errors import AuthenticationError
from fedhh.rpc.aggregator_wire import (
    CHUNK_BYTES,
    DEVICE_SERVICE,
    CallKind,
    await_digest,
    consistency_digest,
    header_digest,
    keys_from_pb,
    masked_vector_header,
    shares_digest,
    shares_from_pb,
    stage_from_pb,
    unmask_digest,
    unmask_from_pb,
)
from fedhh.rpc.errors import status_errors
from fedhh.rpc.serving import response_bytes
from fedhh.secagg import ConsistencyResponse, Decline, ProtocolViolation, Stage, Violation
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator import metrics
from fedhh_aggregator.auth import (
    ControlAuth,
    authenticate_device,
    check_call,
    device_admission,
)
from fedhh_aggregator.control import RoundControl
from fedhh_aggregator.control_wire import ControlCalls
from fedhh_aggregator.device_messages import (
    accept_vector,
    await_response,
    check_share_count,
    declared_upload,
    malformed,
)
from fedhh_aggregator.errors import UploadTimeout
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.rounds import Limits, Round
from fedhh_aggregator.session_stream import parse_message, run_session

# A masked input's header: a session id, the credentials (an admission with its Merkle proof,
# a signature), two numbers and a digest; a few hundred bytes at the largest cohorts.
MAX_HEADER_BYTES = 8 * 1024

_M = TypeVar("_M")
# The device calls whose body comes whole, in one message with the credentials.
_SignedBody = pb.SubmitSharesRequest | pb.SubmitConsistencyRequest | pb.SubmitUnmaskRequest


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
            raise malformed("AdvertiseKeys needs the keys")
        message = keys_from_pb(round_.session_id, request.keys)
        admission = message.admission
        # The library then checks that the admission's keys are the advertised ones.
        if admission is None or admission.device_id != message.device_id or not round_.admitted(
                admission):
            raise AuthenticationError("the admission is not the coordinator's for this device")
        accepted = await round_.submit(Stage.ADVERTISE_KEYS, message)
        return await _submitted(round_, message.device_id, Stage.ADVERTISE_KEYS, accepted,
                                _wait_budget(request.wait_next_ms, context))

    @status_errors
    async def Decline(self, request: pb.DeclineRequest,
                      context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        """The device gives up its seat (``Round.decline``): signed by the admitted device,
        so no one else can release its seat; a repeat is answered ``accepted`` false."""
        round_ = self._round(request.session_id, "Decline", request.ByteSize())
        device_id = authenticate_device(round_, request.credentials, CallKind.DECLINE, b"")
        accepted = await round_.decline(Decline(round_.session_id, device_id))
        return pb.SubmitResponse(accepted=accepted)

    @status_errors
    async def AwaitStage(self, request: pb.AwaitStageRequest,
                         context: grpc.aio.ServicerContext) -> pb.AwaitStageResponse:
        round_ = self._round(request.session_id, "AwaitStage", request.ByteSize())
        stage = stage_from_pb(request.stage)
        if stage is None:
            raise malformed(f"unknown stage {request.stage}")
        device_id = authenticate_device(round_, request.credentials, CallKind.AWAIT,
                                        await_digest(stage))
        return await_response(round_, await round_.await_request(
            device_id, stage, _wait_budget(request.wait_ms, context)))

    @status_errors
    async def SubmitShares(self, request: pb.SubmitSharesRequest,
                           context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        round_, device_id, message = self._signed_body(
            request, "SubmitShares", CallKind.SHARES,
            lambda _, device: shares_from_pb(device, request), shares_digest)
        accepted = await round_.submit(Stage.SHARE_KEYS, message)
        return await _submitted(round_, device_id, Stage.SHARE_KEYS, accepted,
                                _wait_budget(request.wait_next_ms, context))

    @status_errors
    async def SubmitMaskedInput(self, request: AsyncIterator[pb.MaskedInputChunk],
                                context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        chunks = aiter(request)
        try:
            async with asyncio.timeout(self._registry.limits.upload_idle_s):
                first = await anext(chunks, None)
        except TimeoutError:
            raise UploadTimeout("no upload header within "
                                f"{self._registry.limits.upload_idle_s:g} s") from None
        if first is None or first.WhichOneof("part") != "header":
            raise malformed("a masked input starts with its header")
        limits = self._registry.limits
        return await self._masked_input(
            first.header, first.ByteSize(),
            lambda expected: _receive(chunks, expected, limits), "SubmitMaskedInput", context)

    @status_errors
    async def SubmitMaskedVector(self, request: pb.MaskedVector,
                                 context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        if not request.HasField("header"):
            raise malformed("a masked vector needs its header")

        async def receive(expected: int) -> tuple[bytes, bytes]:
            data = request.data
            if len(data) != expected:
                raise ProtocolViolation(Violation.WRONG_LENGTH, f"got {len(data)} bytes, the "
                                        f"round's vectors have {expected}")
            return data, hashlib.sha256(data).digest()

        return await self._masked_input(request.header, request.header.ByteSize(), receive,
                                        "SubmitMaskedVector", context)

    async def _masked_input(self, header: pb.MaskedInputHeader, header_size: int,
                            receive: Callable[[int], Awaitable[tuple[bytes | bytearray, bytes]]],
                            rpc: str, context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        """Both forms of stage 2: ``receive(expected)`` returns exactly ``expected`` bytes of
        vector and their SHA-256, or raises.

        Everything that can be checked before the vector is, in this order: the header
        (:meth:`_checked_header`), the stage, a repeat of an accepted upload (an identical one
        is answered at once, a different one refused), and one upload per device at a time.
        Only then is an upload slot taken and the vector read, each message within
        ``upload_idle_s`` and the whole at ``upload_min_rate`` (after that grace).
        """
        round_, device_id, declared = self._checked_header(header, rpc, header_size)
        received = metrics.BYTES_RECEIVED.labels(rpc)

        async def counted(expected: int) -> tuple[bytes | bytearray, bytes]:
            vector = await receive(expected)
            received.inc(expected)
            return vector

        accepted = await accept_vector(self._registry, round_, device_id, declared, counted)
        return await _submitted(round_, device_id, Stage.MASKED_INPUT, accepted,
                                _wait_budget(header.wait_next_ms, context))

    def _checked_header(self, header: pb.MaskedInputHeader, rpc: str, header_size: int
                        ) -> tuple[Round, int, bytes]:
        """The round, the device and the vector's declared SHA-256 of an upload's
        header, checked in this order: the round, the admission, the declared length, the
        header's signature (so only an admitted device that signed this upload gets past)."""
        round_ = self._round(header.session_id, rpc, header_size)
        admission = device_admission(round_, header.credentials)
        declared = declared_upload(round_, header.total_bytes, header.vector_sha256)
        device_id = check_call(round_, admission, header.credentials, CallKind.MASKED_INPUT,
                               header_digest(header.total_bytes, declared))
        return round_, device_id, declared

    def masked_vector_caller(self, prefix: bytes) -> tuple[bytes, int] | None:
        """Who sends the ``SubmitMaskedVector`` whose encoding starts with ``prefix``: (the
        session, the device), once its header is there and checked as the call will check it
        (None before; a ``FedhhError`` if it fails). The Connect port runs this before it
        gives the body one of its ``max_uploads`` turns, as the gRPC port's stream checks the
        upload's header before it takes a slot (docs/threat-model.md)."""
        found = masked_vector_header(prefix, MAX_HEADER_BYTES)
        if found is None:
            return None
        round_, device_id, _ = self._checked_header(found[0], "SubmitMaskedVector", 0)
        return round_.session_id, device_id

    @status_errors
    async def SubmitConsistency(self, request: pb.SubmitConsistencyRequest,
                                context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        round_, device_id, message = self._signed_body(
            request, "SubmitConsistency", CallKind.CONSISTENCY,
            lambda round_, device: ConsistencyResponse(round_.session_id, device,
                                                       bytes(request.signature)),
            consistency_digest)
        accepted = await round_.submit(Stage.CONSISTENCY_CHECK, message)
        return await _submitted(round_, device_id, Stage.CONSISTENCY_CHECK, accepted,
                                _wait_budget(request.wait_next_ms, context))

    @status_errors
    async def SubmitUnmask(self, request: pb.SubmitUnmaskRequest,
                           context: grpc.aio.ServicerContext) -> pb.SubmitResponse:
        round_, _, message = self._signed_body(
            request, "SubmitUnmask", CallKind.UNMASK,
            lambda _, device: unmask_from_pb(device, request), unmask_digest)
        return pb.SubmitResponse(accepted=await round_.submit(Stage.UNMASK, message))

    def _signed_body(self, request: _SignedBody, rpc: str, kind: CallKind,
                     parse: Callable[[Round, int], _M], digest: Callable[[_M], bytes]
                     ) -> tuple[Round, int, _M]:
        """The round, the device and the message (``parse(round, device id)``) of a device
        call whose body comes whole (shares, a consistency signature, unmask shares), checked
        in this order: the round, the admission, the share lists' length (before a share is
        converted: ``check_share_count``; a consistency response has none), the call's
        signature over the message's ``digest``. Nothing reaches the round before all pass."""
        round_ = self._round(request.session_id, rpc, request.ByteSize())
        admission = device_admission(round_, request.credentials)
        check_share_count(round_, request)
        message = parse(round_, admission.device_id)
        device_id = check_call(round_, admission, request.credentials, kind, digest(message))
        return round_, device_id, message

    @status_errors
    async def Session(self, request: AsyncIterator[pb.SessionMessage],
                      context: grpc.aio.ServicerContext) -> None:
        """The whole session on one stream (``fedhh_aggregator.session_stream``)."""
        await run_session(self._registry, context)


def add_device_service(servicer: DeviceServicer, server: grpc.aio.Server) -> None:
    """Register ``fedhh.v1.SecureAggregation`` as the generated code does, except that a
    session stream's event may be written as its encoded bytes (a request the round's
    ``RequestEncoder`` built from parts encoded once), which go out as they are, or as a
    function that encodes it (``fedhh.rpc.serving.response_bytes``), and that its messages
    are counted as they are parsed (``session_stream.parse_message``)."""
    generated = _Registrations()
    pb_grpc.add_SecureAggregationServicer_to_server(servicer, generated)
    handlers = dict(generated.handlers)
    handlers["Session"] = handlers["Session"]._replace(request_deserializer=parse_message,
                                                       response_serializer=response_bytes)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(DEVICE_SERVICE, handlers),))
    server.add_registered_method_handlers(DEVICE_SERVICE, handlers)


class _Registrations:
    """Stands in for a server to the generated registration, keeping its method handlers."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(self, service: str,
                                       handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.handlers = handlers


# A long-poll answers at least this long before the caller's deadline. A call can wait in the
# server's backlog before its handler runs (grpc.aio takes one call per turn of a busy event
# loop); a long-poll that then waited its full wait_ms could answer after the device had given
# up (DEADLINE_EXCEEDED), and the device sent its whole submission again (one 50,000-device try:
# 27,260 duplicate share submissions for 45,374 accepted).
ANSWER_MARGIN_S = 5.0


def _wait_budget(requested_ms: int, context: grpc.aio.ServicerContext) -> float:
    """Seconds a long-poll may wait: what the caller asked for, ending ANSWER_MARGIN_S before
    its deadline (0 if that has nearly passed: answer now)."""
    wait = requested_ms / 1000
    remaining = context.time_remaining()
    if remaining is not None:
        wait = min(wait, max(0.0, remaining - ANSWER_MARGIN_S))
    return wait


async def _submitted(round_: Round, device_id: int, stage: Stage, accepted: bool,
                     wait_next_s: float) -> pb.SubmitResponse:
    """The answer to a submission; with ``wait_next_s`` > 0, also this device's next request
    (as AwaitStage would answer it after waiting up to that long)."""
    response = pb.SubmitResponse(accepted=accepted)
    if wait_next_s > 0:
        outcome = await round_.await_request(device_id, round_.stage_after(stage), wait_next_s)
        response.next.CopyFrom(await_response(round_, outcome))
    return response


async def _receive(chunks: AsyncIterator[pb.MaskedInputChunk], expected: int, limits: Limits
                   ) -> tuple[bytearray, bytes]:
    """Exactly ``expected`` bytes from the data chunks, and their SHA-256; each message must
    arrive within ``limits.upload_idle_s``, and the whole within that grace plus ``expected``
    bytes at ``limits.upload_min_rate``."""
    buffer = bytearray(expected)
    view = memoryview(buffer)
    digest = hashlib.sha256()
    received = 0
    loop = asyncio.get_running_loop()
    idle = limits.upload_idle_s
    until = loop.time() + idle + expected / limits.upload_min_rate
    while True:
        wait = min(idle, until - loop.time())
        try:
            async with asyncio.timeout(max(wait, 0.0)):
                chunk = await anext(chunks, None)
        except TimeoutError:
            slow = wait < idle
            raise UploadTimeout(
                f"upload slower than {limits.upload_min_rate} bytes/s" if slow else
                f"no upload data for {idle:g} s") from None
        if chunk is None:
            break
        if chunk.WhichOneof("part") != "data":
            raise malformed("only data chunks may follow the header")
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


class ControlServicer(ControlCalls, pb_grpc.AggregatorControlServicer):
    """fedhh.v1.AggregatorControl: the coordinator's calls (bearer token on each)."""

    def __init__(self, registry: RoundRegistry, auth: ControlAuth) -> None:
        super().__init__(RoundControl(registry), auth)
        self._registry = registry

    @status_errors
    async def OpenRound(self, request: pb.OpenRoundRequest,
                        context: grpc.aio.ServicerContext) -> pb.OpenRoundResponse:
        self._auth.check(context)
        round_, created = await self._registry.open(bytes(request.config),
                                                    bytes(request.signature))
        return pb.OpenRoundResponse(session_id=round_.session_id, created=created)
