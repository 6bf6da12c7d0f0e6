"""The coordinator checks a released result against the round it asked for (outside probe,
thirty-sixth stop): an answer naming another round is refused, never counted into this round
(the attempt aborted and charged as one that reached unmasking, the round cancelled at the
service), and a sum of another dimension than the round was opened with fails naming both.
Before, ``GrpcAggregator`` read any released header as the round's: another round's sum (a
confused or hostile aggregation service, a combiner's bookkeeping bug) went to the release
hook and into the round's counts. Fake aggregator and combiner, over gRPC."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from fedhh.errors import RoundAborted
from fedhh.rpc import serving
from fedhh.secagg.config import RoundConfig, SignedConfig, StageDeadlines
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_coordinator.control import GrpcAggregator

TOKEN = b"t" * 32
ROUND = b"r/1/1"
DIMENSION = 8


def signed(round_id: bytes, dimension: int = DIMENSION) -> SignedConfig:
    config = RoundConfig(round_id, 10, dimension, 16, 5, 4, 3, b"g" * 32,
                         StageDeadlines(1, 2, 3, 4, 5))
    return SignedConfig(config.to_bytes(), b"s" * 64)


def released(round_id: bytes, dimension: int, shards: int = 0) -> list[pb.ResultChunk]:
    """A released stream of ``dimension`` 16-bit ones, no evidence announced."""
    header = pb.ResultHeader(
        state=pb.AGGREGATION_STATE_RELEASED, round_id=round_id, dimension=dimension,
        modulus_bits=16, total_bytes=2 * dimension, num_contributors=5,
        shards=[pb.ShardResult(round_id=round_id + b"/s%d" % j,
                               state=pb.AGGREGATION_STATE_RELEASED, num_contributors=5)
                for j in range(shards)])
    return [pb.ResultChunk(header=header),
            pb.ResultChunk(data=np.ones(dimension, dtype="<u2").tobytes())]


class Fake:
    """Answers GetResult with ``stream``; records cancels, and apart the sums said read
    (CancelRound's ``delivered``) and the GetResults that asked to hold the sum."""

    def __init__(self, stream: list[pb.ResultChunk]) -> None:
        self.stream = stream
        self.cancelled: list[bytes] = []
        self.delivered: list[bytes] = []
        self.held: list[bool] = []
        self.delivered_on_read: list[bytes] = []  # those said delivered as the sum was read

    async def OpenRound(self, request: Any, context: Any) -> pb.OpenRoundResponse:
        return pb.OpenRoundResponse(session_id=b"x" * 32)

    async def OpenShardedRound(self, request: Any, context: Any
                               ) -> pb.OpenShardedRoundResponse:
        return pb.OpenShardedRoundResponse(session_ids=[b"x" * 32 for _ in request.shards])

    async def GetResult(self, request: Any, context: Any) -> Any:
        self.held.append(request.hold)
        for chunk in self.stream:
            yield chunk

    async def CancelRound(self, request: Any, context: Any) -> pb.CancelRoundResponse:
        (self.delivered if request.delivered else self.cancelled).append(bytes(request.round_id))
        return pb.CancelRoundResponse(state=pb.AGGREGATION_STATE_ABORTED)


class FakeAggregator(Fake, pb_grpc.AggregatorControlServicer):
    pass


class FakeCombiner(Fake, pb_grpc.CombinerControlServicer):
    pass


LAST: list[Fake] = []  # the last settle's fake


async def settle(sharded: bool, stream: list[pb.ResultChunk], opened_dimension: int
                 ) -> tuple[Any, list[Any], list[bytes]]:
    """Open ROUND (of ``opened_dimension``) at a fake answering ``stream``, read its result:
    (the result or the error, what the release hook saw, the rounds cancelled)."""
    fake: Fake
    server = serving.new_server()
    if sharded:
        fake = FakeCombiner(stream)
        pb_grpc.add_CombinerControlServicer_to_server(fake, server)
    else:
        fake = FakeAggregator(stream)
        pb_grpc.add_AggregatorControlServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    aggregator = GrpcAggregator(f"127.0.0.1:{port}", None, TOKEN)
    seen: list[Any] = []

    async def hook(release: Any) -> None:
        seen.append(release)

    try:
        if sharded:
            await aggregator.combiner.open_round(
                ROUND, [(signed(ROUND + b"/s0", opened_dimension), 0)])
            service: Any = aggregator.combiner
        else:
            await aggregator.single.open_round(signed(ROUND, opened_dimension))
            service = aggregator.single
        try:
            outcome: Any = await service.result(ROUND, opened_dimension, 10.0, hook)
        except RoundAborted as aborted:
            outcome = aborted
        fake.delivered_on_read = list(fake.delivered)
        await service.delivered(ROUND)  # (as the round driver does once the release is stored)
        await asyncio.wait_for(asyncio.gather(*service._deliveries), 10)  # (told in a task)
        LAST.clear()
        LAST.append(fake)
        return outcome, seen, fake.cancelled
    finally:
        await aggregator.close()
        await server.stop(None)


@pytest.mark.parametrize("sharded", [False, True])
def test_another_rounds_release_is_refused_and_never_counted(sharded: bool) -> None:
    shards = 1 if sharded else 0
    outcome, seen, cancelled = asyncio.run(
        settle(sharded, released(b"r/0/9", DIMENSION, shards), DIMENSION))
    assert isinstance(outcome, RoundAborted), outcome
    assert "refused" in outcome.reason and "r/0/9" in outcome.reason
    assert outcome.reached_unmask  # charged: this round's devices may have unmasked
    assert seen == []  # the release hook (the charge, the counts) never saw it
    assert cancelled == [ROUND]


@pytest.mark.parametrize("sharded", [False, True])
def test_a_sum_of_another_dimension_fails_naming_both(sharded: bool) -> None:
    shards = 1 if sharded else 0
    outcome, seen, _ = asyncio.run(
        settle(sharded, released(ROUND, DIMENSION + 3, shards), DIMENSION))
    assert isinstance(outcome, RoundAborted), outcome
    assert f"dimension {DIMENSION + 3}" in outcome.reason
    assert f"the round's is {DIMENSION}" in outcome.reason
    assert seen == []


@pytest.mark.parametrize("sharded", [False, True])
def test_the_rounds_own_release_still_reads(sharded: bool) -> None:
    shards = 1 if sharded else 0
    outcome, seen, cancelled = asyncio.run(
        settle(sharded, released(ROUND, DIMENSION, shards), DIMENSION))
    total, contributors = outcome
    assert np.array_equal(total, np.ones(DIMENSION)) and contributors == 5
    assert len(seen) == 1 and cancelled == []
    # Asked held, and said delivered only once the driver stored its release, not as it is
    # read: the service keeps a sum sent whole until then (a charge that waits for the store
    # past the call's deadline leaves it unread; a store that fails to commit the release
    # leaves it to be read again). Before, it was said delivered as it was read.
    (fake,) = LAST
    assert fake.held == [True] and fake.delivered_on_read == []
    assert fake.delivered == [ROUND]


def test_a_running_answer_of_another_round_is_refused() -> None:
    running = [pb.ResultChunk(header=pb.ResultHeader(state=pb.AGGREGATION_STATE_ABORTED,
                                                     round_id=b"r/0/9",
                                                     abort_reason="too_few_devices"))]
    outcome, _, _ = asyncio.run(settle(False, running, DIMENSION))
    # another round's abort is not this round's: refused as such, not read as "too few"
    assert isinstance(outcome, RoundAborted) and "refused" in outcome.reason
    assert "too_few_devices" not in outcome.reason
