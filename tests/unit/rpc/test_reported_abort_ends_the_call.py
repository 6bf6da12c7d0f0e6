"""A client told a round aborted lets the service's handler end the call (ci46b, forty-sixth
stop): the aggregator and the combiner forget an aborted round when their GetResult handler
resumes after writing the report, and the client cancelled the call as soon as it read the
abort. On a loaded machine the cancellation came first, the handler never resumed, and the
round stayed in the registry until its outcome expired (test_aggregator_service's
below-n_min test timed out waiting for it). Fake services over gRPC on OS ports."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fedhh.errors import RoundAborted
from fedhh.rpc import serving
from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.combiner_client import CombinerControl
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

TOKEN = "t" * 32
ROUND = b"r/1/1"
# (how long the fake's handler takes to resume after its write: a cancellation sent when the
# client reads the abort reaches it well within this, on any machine)
RESUME_S = 0.5


class Fake:
    """GetResult: the abort report, then (as the services do) bookkeeping after the write."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self.ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def GetResult(self, request: Any, context: Any) -> None:
        header = pb.ResultHeader(state=pb.AGGREGATION_STATE_ABORTED, round_id=ROUND,
                                 abort_reason="too_few_devices", shards=[
                                     pb.ShardResult(round_id=ROUND + b"/s%d" % j,
                                                    state=pb.AGGREGATION_STATE_ABORTED)
                                     for j in range(self.shards)])
        try:
            await context.write(pb.ResultChunk(header=header))
            await asyncio.sleep(RESUME_S)
        except asyncio.CancelledError:
            self.ended.set_result("cancelled")
            raise
        self.ended.set_result("finished")


class FakeAggregator(Fake, pb_grpc.AggregatorControlServicer):
    pass


class FakeCombiner(Fake, pb_grpc.CombinerControlServicer):
    pass


async def read_abort(sharded: bool) -> str:
    server = serving.new_server()
    fake: Fake
    if sharded:
        fake = FakeCombiner(1)
        pb_grpc.add_CombinerControlServicer_to_server(fake, server)
    else:
        fake = FakeAggregator(0)
        pb_grpc.add_AggregatorControlServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = serving.open_channel(f"127.0.0.1:{port}", None)
    try:
        control: Any = (CombinerControl(channel, TOKEN) if sharded
                        else AggregatorControl(channel, TOKEN))
        with pytest.raises(RoundAborted, match="too_few_devices"):
            await control.result(ROUND, 10.0)
        return await asyncio.wait_for(fake.ended, 30)
    finally:
        await channel.close()
        await server.stop(None)


@pytest.mark.parametrize("sharded", [False, True])
def test_the_handler_ends_the_call_after_an_abort(sharded: bool) -> None:
    assert asyncio.run(read_abort(sharded)) == "finished"


class HungAggregator(pb_grpc.AggregatorControlServicer):
    """GetResult: the abort report, then a handler that never ends the call (a hung service,
    or one whose trailers a partition lost)."""

    def __init__(self) -> None:
        self.ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def GetResult(self, request: Any, context: Any) -> None:
        header = pb.ResultHeader(state=pb.AGGREGATION_STATE_ABORTED, round_id=ROUND,
                                 abort_reason="too_few_devices")
        try:
            await context.write(pb.ResultChunk(header=header))
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.ended.set_result("cancelled")
            raise


async def read_hung_abort() -> tuple[str, float]:
    server = serving.new_server()
    fake = HungAggregator()
    pb_grpc.add_AggregatorControlServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = serving.open_channel(f"127.0.0.1:{port}", None)
    loop = asyncio.get_running_loop()
    try:
        # call_timeout 1 s against a wait of 30 s: the call's own deadline is 31 s away
        control = AggregatorControl(channel, TOKEN, call_timeout=1.0)
        start = loop.time()
        with pytest.raises(RoundAborted, match="too_few_devices"):
            await asyncio.wait_for(control.result(ROUND, 30.0), 10)
        elapsed = loop.time() - start
        return await asyncio.wait_for(fake.ended, 10), elapsed
    finally:
        await channel.close()
        await server.stop(None)


def test_a_service_that_never_ends_the_call_after_an_abort_costs_one_call_timeout() -> None:
    # Before, the client waited out the call's whole deadline (31 s here, 60 s at the defaults).
    ended, elapsed = asyncio.run(read_hung_abort())
    assert ended == "cancelled"
    assert 1.0 <= elapsed < 10
