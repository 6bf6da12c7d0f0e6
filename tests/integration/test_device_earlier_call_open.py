"""A device's call made again while the aggregator still serves its earlier attempt (a
long-poll held, an upload being read) is refused for the moment, not for good: the device asks
again with its backoff, and the call passes once the earlier one ended. Before, the aggregator
answered RESOURCE_EXHAUSTED, which the Python device took as final (REJECTED): a device whose
call timed out at its end while the aggregator still held it gave up a round it could still
complete, where the web device asked again."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import grpc
from aggregator_testkit import TOKEN, aggregator, make_cohort, run

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.device_client import DeviceSession, RetryPolicy
from fedhh.secagg import Stage
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.rounds import Limits


class _EndsTheFirstWhenRefused:
    """A device stub that ends ``first`` (the device's earlier long-poll, as its own deadline
    would) once the aggregator refuses the repeat, and counts the refusals."""

    def __init__(self, stub: Any, first: asyncio.Task[object]) -> None:
        self._stub, self._first, self.refused = stub, first, []

    async def AwaitStage(self, request: pb.AwaitStageRequest, **kwargs: Any) -> Any:
        try:
            return await self._stub.AwaitStage(request, **kwargs)
        except grpc.aio.AioRpcError as error:
            self.refused.append(error.code())
            self._first.cancel()
            raise


def test_a_long_poll_asked_again_while_the_first_is_held_passes_once_it_ends() -> None:
    cohort = make_cohort(3, 8, 2, 2, n_min=2, round_id=b"run/earlier-call/1")

    async def scenario() -> tuple[list[grpc.StatusCode], int]:
        async with aggregator(Limits(max_polls_per_device=1)) as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(cohort.signed)
            round_ = agg.registry.by_session(cohort.session_id)

            def device(stub: Any) -> DeviceSession:
                # (patient while the stage is open, as participate makes it: its retries are
                # bounded by the stage, not by a count a loaded machine may run through)
                return DeviceSession(stub, cohort.device(1), cohort.identity_keys[1],
                                     cohort.admissions[1],
                                     retry=RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05),
                                     patient_until=time.time() + 600, rng=random.Random(1))

            stub = pb_grpc.SecureAggregationStub(channel)
            first = asyncio.create_task(device(stub).await_request(Stage.SHARE_KEYS, 600_000))
            while round_._polls.get(1, 0) == 0:  # (the first long-poll is held)
                await asyncio.sleep(0.01)
            repeat = _EndsTheFirstWhenRefused(stub, first)
            try:
                status, _, _ = await device(repeat).await_request(Stage.SHARE_KEYS, 0)
            finally:
                first.cancel()
                await asyncio.gather(first, return_exceptions=True)
            return repeat.refused, status

    refused, status = run(scenario(), timeout=120)
    assert refused[:1] == [grpc.StatusCode.UNAVAILABLE], refused
    assert status == pb.AWAIT_STATUS_PENDING
