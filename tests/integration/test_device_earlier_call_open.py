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
from collections.abc import Awaitable
from typing import Any

import grpc
from aggregator_testkit import TOKEN, Cohort, aggregator, make_cohort, run

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.device_client import DeviceSession, RetryPolicy, participate
from fedhh.secagg import MaskedInputRequest, ShareKeysRequest, Stage
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.rounds import Limits


def _device(cohort: Cohort, stub: Any, **options: Any) -> DeviceSession:
    # (patient while the stage is open, as participate makes it: its retries are bounded by
    # the stage, not by a count a loaded machine may run through)
    return DeviceSession(stub, cohort.device(1), cohort.identity_keys[1], cohort.admissions[1],
                         retry=RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05),
                         patient_until=time.time() + 600, rng=random.Random(1), **options)


class _RefusalsEndTheFirst:
    """A device stub's part that counts the aggregator's refusals of a repeated call and, at
    each, ends the device's earlier call (``_first``), as its own deadline or cancellation
    would."""

    def __init__(self, stub: Any, first: asyncio.Future[Any] | None = None) -> None:
        self._stub, self._first = stub, first
        self.refused: list[grpc.StatusCode] = []

    async def _repeat(self, call: Awaitable[Any]) -> Any:
        try:
            return await call
        except grpc.aio.AioRpcError as error:
            self.refused.append(error.code())
            assert self._first is not None
            self._first.cancel()
            raise


class _EndsTheFirstWhenRefused(_RefusalsEndTheFirst):
    """A device stub that ends ``first`` (the device's earlier long-poll) once the aggregator
    refuses the repeat."""

    async def AwaitStage(self, request: pb.AwaitStageRequest, **kwargs: Any) -> Any:
        return await self._repeat(self._stub.AwaitStage(request, **kwargs))


def test_a_long_poll_asked_again_while_the_first_is_held_passes_once_it_ends() -> None:
    cohort = make_cohort(3, 8, 2, 2, n_min=2, round_id=b"run/earlier-call/1")

    async def scenario() -> tuple[list[grpc.StatusCode], int]:
        async with aggregator(Limits(max_polls_per_device=1)) as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(cohort.signed)
            round_ = agg.registry.by_session(cohort.session_id)

            stub = pb_grpc.SecureAggregationStub(channel)
            first = asyncio.create_task(
                _device(cohort, stub).await_request(Stage.SHARE_KEYS, 600_000))
            while round_._polls.get(1, 0) == 0:  # (the first long-poll is held)
                await asyncio.sleep(0.01)
            repeat = _EndsTheFirstWhenRefused(stub, first)
            try:
                status, _, _ = await _device(cohort, repeat).await_request(Stage.SHARE_KEYS, 0)
            finally:
                first.cancel()
                await asyncio.gather(first, return_exceptions=True)
            return repeat.refused, status

    refused, status = run(scenario(), timeout=120)
    assert refused[:1] == [grpc.StatusCode.UNAVAILABLE], refused
    assert status == pb.AWAIT_STATUS_PENDING


class _UploadOutlivesTheDeviceDeadline(_RefusalsEndTheFirst):
    """A device stub whose first upload goes on at the aggregator, stalled after its header,
    while the device is told its deadline passed (it asks again at once, its stage open); the
    stalled upload is ended once the aggregator refuses an attempt, as the device's own
    cancellation ends it over a slow link. Counts the refusals."""

    def __init__(self, stub: Any, held: asyncio.Event) -> None:
        super().__init__(stub)
        self._held = held

    async def SubmitMaskedInput(self, chunks: Any, **kwargs: Any) -> Any:
        if self._first is None:
            async def stalled() -> Any:
                async for chunk in chunks:
                    yield chunk
                    break
                await asyncio.Event().wait()  # (until the call is cancelled)
                yield  # pragma: no cover
            self._first = asyncio.ensure_future(self._stub.SubmitMaskedInput(stalled(), **kwargs))
            await self._held.wait()
            raise grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), "Deadline Exceeded")
        return await self._repeat(self._stub.SubmitMaskedInput(chunks, **kwargs))

    async def close(self) -> None:
        if self._first is not None:
            self._first.cancel()
            await asyncio.gather(self._first, return_exceptions=True)


def test_an_upload_made_again_while_the_first_is_read_is_accepted_once_it_ends() -> None:
    cohort = make_cohort(3, 8, 2, 2, n_min=2, round_id=b"run/earlier-call/2")

    async def scenario() -> tuple[list[grpc.StatusCode], bool]:
        async with aggregator() as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(cohort.signed)
            round_ = agg.registry.by_session(cohort.session_id)
            others = [asyncio.create_task(participate(
                channel, cohort.device(u), cohort.reports[u], identity_key=cohort.identity_keys[u],
                admission=cohort.admissions[u])) for u in (2, 3)]
            stub = pb_grpc.SecureAggregationStub(channel)
            held = asyncio.Event()
            upload = _UploadOutlivesTheDeviceDeadline(stub, held)
            s1 = _device(cohort, stub)
            try:
                device = s1.device
                await s1.advertise(device.advertise_keys())
                status, request, _ = await s1.await_request(Stage.SHARE_KEYS, 600_000)
                assert status == pb.AWAIT_STATUS_READY
                assert isinstance(request, ShareKeysRequest)
                await s1.submit_shares(device.share_keys(request))
                status, request, _ = await s1.await_request(Stage.MASKED_INPUT, 600_000)
                assert isinstance(request, MaskedInputRequest)
                masked = device.masked_input(request, cohort.reports[1])
                uploading = _device(cohort, upload, chunk_bytes=4)
                sent = asyncio.create_task(uploading.submit_masked_input(masked))
                while 1 not in round_.uploading:  # (the first upload is being read)
                    await asyncio.sleep(0.01)
                held.set()
                accepted = await sent
            finally:
                await upload.close()
                for task in others:
                    task.cancel()
                await asyncio.gather(*others, return_exceptions=True)
            return upload.refused, accepted

    refused, accepted = run(scenario(), timeout=120)
    assert refused[:1] == [grpc.StatusCode.UNAVAILABLE], refused
    assert accepted
