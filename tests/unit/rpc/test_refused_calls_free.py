"""A refused call frees what its handler held as soon as it is answered, not at the cycle
collector's next pass (``fedhh.rpc.serving._forget_frames``): gRPC keeps an abort in reference
cycles with the traceback of every frame it left, and the services run the collector seldom,
so a flood of refused megabyte requests held a coordinator's and an aggregator's memory by
the gigabyte. The collector is off during each call here; a request or a frame's local that
outlives the answer is what the services would have held.

A flood is what held memory, so a flood is sent: of ``FLOOD`` refused requests, at most one may
stay held once the answers are in. (One request stayed held, with no referrer the collector
can see, in about a quarter of the runs that sent a single call, so in gRPC's C layer, until
a later call: not a flood's memory. Before the fix, every request of the flood was held.)"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
import uvloop

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.errors import status_errors
from fedhh.v1 import aggregator_pb2 as aggregator_pb
from fedhh.v1 import aggregator_pb2_grpc as aggregator_grpc
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc


class Held:
    """What a handler builds from a request before refusing it."""


held: list[weakref.ref[Held]] = []


class Devices(pb_grpc.DeviceServiceServicer):
    @status_errors
    async def Enroll(self, request: pb.EnrollRequest, context: Any) -> pb.EnrollResponse:
        built = Held()
        held.append(weakref.ref(built))
        raise ConfigError("refused")


class Control(aggregator_grpc.AggregatorControlServicer):
    async def GetResult(self, request: aggregator_pb.GetResultRequest,
                        context: Any) -> AsyncIterator[aggregator_pb.ResultChunk]:
        built = Held()
        held.append(weakref.ref(built))
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "refused")
        yield aggregator_pb.ResultChunk()  # pragma: no cover


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    held.clear()
    try:
        yield
    finally:
        gc.enable()


FLOOD = 8


async def freed(what: str, holding: Any, kept: int = 0) -> None:
    """Wait until ``holding()`` holds at most ``kept``: the client can read the refusal before
    the server's handler has unwound (its wrappers run on after the status is sent), so on a
    busy machine the answer can come first. A deadline, not a window: what is never freed
    fails."""
    deadline = asyncio.get_running_loop().time() + 30
    while len(left := holding()) > kept:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} still held 30 s after the refusals: "
                                 f"{len(left)} {type(left[0]).__name__}")
        await asyncio.sleep(0.01)


async def refuse_both() -> None:
    server = serving.new_server(4 << 20)
    pb_grpc.add_DeviceServiceServicer_to_server(Devices(), server)
    aggregator_grpc.add_AggregatorControlServicer_to_server(Control(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            # (sent as bytes: the only EnrollRequest is the one the server parsed)
            enroll = channel.unary_unary("/fedhh.v1.DeviceService/Enroll")
            for _ in range(FLOOD):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await enroll(pb.EnrollRequest(
                        enrollment_token=b"x" * 1_000_000).SerializeToString())
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            # (no weak reference to a message: found as the collector would find it)
            await freed("the EnrollRequests", lambda: [
                o for o in gc.get_objects() if isinstance(o, pb.EnrollRequest)], kept=1)
            for _ in range(FLOOD):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    async for _ in aggregator_grpc.AggregatorControlStub(channel).GetResult(
                            aggregator_pb.GetResultRequest()):
                        pass
                assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert len(held) == 2 * FLOOD
            await freed("what the handlers built",
                        lambda: [r() for r in held if r() is not None], kept=1)
    finally:
        await server.stop(None)


def test_a_refused_call_holds_nothing_its_handler_built(collector_off: None) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(asyncio.wait_for(refuse_both(), 60))
