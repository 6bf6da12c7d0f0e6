"""A unary call's request on a gRPC port (``fedhh.rpc.serving.RequestDeadline``): due within
a deadline, with a cap on the calls of the server waiting for theirs. gRPC itself holds a call
opened with its headers only for ever, ~21 KB each: 80,000 of them held a coordinator at
1.8 GB (``Enroll``'s token is in its request, so nothing refuses such a call before it).

A server on 127.0.0.1 with the coordinator's device service and the aggregator's control
service (a unary-stream method) registered as the services register them, and small limits.
Each test waits for the outcome it asserts, never a fixed time."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

import grpc
import pytest
import uvloop

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.request_waits import RequestWaits
from fedhh.v1 import aggregator_pb2 as aggregator_pb
from fedhh.v1 import aggregator_pb2_grpc as aggregator_grpc
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc

T = TypeVar("T")
BOUND_S = 20.0  # how long any awaited outcome may take on a busy machine
TIMEOUT_S = 2.0  # the servers' deadline for a request
TICK = 0.01  # (a timer may fire up to a clock tick before time.monotonic() says)
ENROLL = "/fedhh.v1.DeviceService/Enroll"
GET_RESULT = "/fedhh.v1.AggregatorControl/GetResult"


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(asyncio.wait_for(coro, 60))


async def until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {BOUND_S} s: {what}")
        await asyncio.sleep(0.005)


class Devices(pb_grpc.DeviceServiceServicer):
    async def Enroll(self, request: pb.EnrollRequest, context: Any) -> pb.EnrollResponse:
        return pb.EnrollResponse(device_id=len(request.label))


class Control(aggregator_grpc.AggregatorControlServicer):
    """A unary-stream method that writes its responses (as the aggregator's)."""

    async def GetResult(self, request: aggregator_pb.GetResultRequest, context: Any) -> None:
        for _ in range(2):
            await context.write(aggregator_pb.ResultChunk(data=request.round_id))


class Combiner(aggregator_grpc.CombinerControlServicer):
    """A unary-stream method that yields its responses."""

    async def GetResult(self, request: aggregator_pb.GetResultRequest, context: Any
                        ) -> AsyncIterator[aggregator_pb.ResultChunk]:
        for _ in range(3):
            yield aggregator_pb.ResultChunk(data=request.round_id)


@contextlib.asynccontextmanager
async def serving_with(waits: RequestWaits) -> AsyncIterator[grpc.aio.Channel]:
    server = serving.new_server(request_waits=waits)
    pb_grpc.add_DeviceServiceServicer_to_server(Devices(), server)
    aggregator_grpc.add_AggregatorControlServicer_to_server(Control(), server)
    aggregator_grpc.add_CombinerControlServicer_to_server(Combiner(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel
    finally:
        await channel.close()
        await server.stop(None)


async def never() -> AsyncIterator[bytes]:
    """A request stream that sends nothing (the call's headers only)."""
    await asyncio.Event().wait()
    yield b""


async def nothing() -> AsyncIterator[bytes]:
    """A request stream closed at once, without a message."""
    return
    yield b""


def headers_only(channel: grpc.aio.Channel, method: str = ENROLL) -> Any:
    """A call of ``method`` that sends its headers and never its request."""
    return channel.stream_unary(method, request_serializer=lambda data: data,
                                response_deserializer=lambda data: data)(never())


async def failed(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        async with asyncio.timeout(BOUND_S):
            await call
    return error.value.code(), error.value.details()


def test_calls_waiting_for_their_requests_are_capped_and_timed() -> None:
    """Three calls of any connection may wait for their requests: a fourth (any method, an
    honest one too) is answered UNAVAILABLE at once, which devices retry; the three end
    DEADLINE_EXCEEDED once TIMEOUT_S has passed, and their places are free again. A call
    cancelled by its client gives its place back at once; an honest call (request with its
    headers) is served as before, for a unary-unary method and a unary-stream one alike (one
that writes its responses, one that yields them)."""
    waits = RequestWaits("grpc", limit=3, timeout_s=TIMEOUT_S)

    async def main() -> None:
        async with serving_with(waits) as channel:
            stub = pb_grpc.DeviceServiceStub(channel)
            assert (await stub.Enroll(pb.EnrollRequest(label="abc"), timeout=BOUND_S)
                    ).device_id == 3
            assert waits.waiting == 0
            cancelled = headers_only(channel)
            await until(lambda: waits.waiting == 1, "one call waiting")
            cancelled.cancel()
            await until(lambda: waits.waiting == 0, "the cancelled call's place back")
            # (before the calls start: the server times each from when it meets it, later)
            opened = time.monotonic()
            held = [headers_only(channel), headers_only(channel, GET_RESULT)]
            held.append(headers_only(channel))
            await until(lambda: waits.waiting == 3, "three calls waiting")
            busy = (grpc.StatusCode.UNAVAILABLE,
                    "busy: 3 calls wait for their requests here; retry after a backoff")
            assert await failed(headers_only(channel)) == busy
            assert await failed(stub.Enroll(pb.EnrollRequest(label="a"), timeout=BOUND_S)) \
                == busy
            results = aggregator_grpc.AggregatorControlStub(channel).GetResult(
                aggregator_pb.GetResultRequest(round_id=b"r"), timeout=BOUND_S)
            assert await failed(results.read()) == busy
            for call in held:
                assert await failed(call) == (grpc.StatusCode.DEADLINE_EXCEEDED,
                                              "the request did not arrive within 2 s")
            assert time.monotonic() - opened >= TIMEOUT_S - TICK
            await until(lambda: waits.waiting == 0, "every place back")
            assert (await stub.Enroll(pb.EnrollRequest(label="abcd"), timeout=BOUND_S)
                    ).device_id == 4
            chunks = [chunk async for chunk in aggregator_grpc.AggregatorControlStub(
                channel).GetResult(aggregator_pb.GetResultRequest(round_id=b"r2"),
                                   timeout=BOUND_S)]
            assert [chunk.data for chunk in chunks] == [b"r2", b"r2"]
            chunks = [chunk async for chunk in aggregator_grpc.CombinerControlStub(
                channel).GetResult(aggregator_pb.GetResultRequest(round_id=b"r3"),
                                   timeout=BOUND_S)]
            assert [chunk.data for chunk in chunks] == [b"r3", b"r3", b"r3"]
            assert waits.waiting == 0
    run(main())


def test_a_call_without_its_request_or_with_one_that_does_not_parse() -> None:
    """A call closed before its request ends INVALID_ARGUMENT "a unary call without its
    request"; one whose request does not parse INVALID_ARGUMENT with the parser's reason (the
    servicer never sees it); neither keeps its place."""
    waits = RequestWaits("grpc", limit=3, timeout_s=TIMEOUT_S)

    async def main() -> None:
        async with serving_with(waits) as channel:
            bare = channel.stream_unary(ENROLL, request_serializer=lambda data: data,
                                        response_deserializer=lambda data: data)
            assert await failed(bare(nothing())) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                      "a unary call without its request")
            raw = channel.unary_unary(ENROLL, request_serializer=lambda data: data,
                                      response_deserializer=lambda data: data)
            code, details = await failed(raw(b"\xff\xff", timeout=BOUND_S))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert details.startswith("the request does not parse"), details
            assert waits.waiting == 0
    run(main())


def test_the_limits_are_checked() -> None:
    for limit in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="positive integer"):
            RequestWaits("grpc", limit=limit)  # type: ignore[arg-type]
    for timeout_s in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="timeout"):
            RequestWaits("grpc", timeout_s=timeout_s)
