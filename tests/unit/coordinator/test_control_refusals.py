"""The coordinator's control client (``GrpcAggregator``) tells the service away from a refusal
by the one split of transient from permanent failures (``control_client.passing``) for every
call: a GetResult refused, and the combiner's DescribeWorkers, as GetOutcome and CancelRound
already were; a refused control token is ``ControlTokenRefused``, which settles no attempt.
Before, every GetResult failure read as the service away (the read tried again till the
round's deadline), and DescribeWorkers kept its own list of refusals (the two token codes),
any other permanent answer waited for as an outage. Fake combiner over gRPC."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from control_fake_kit import served

from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_coordinator.aggregation import (
    AggregatorRefused,
    AggregatorUnavailable,
    ControlTokenRefused,
)

ROUND = b"r/1/1"
AWAY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED)
TOKEN_CODES = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


class Combiner(pb_grpc.CombinerControlServicer):
    """Fails GetResult and DescribeWorkers with ``code``."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self.code = code
        self.calls = 0

    async def GetResult(self, request: Any, context: Any) -> Any:
        self.calls += 1
        await context.abort(self.code, "no")

    async def DescribeWorkers(self, request: Any, context: Any) -> Any:
        self.calls += 1
        await context.abort(self.code, "no")


def answered(code: grpc.StatusCode, call: str) -> BaseException | list[Any] | None:
    """What the client's ``call`` ("result" or "workers") raised or returned against a
    combiner failing it with ``code``."""
    fake = Combiner(code)

    async def go() -> BaseException | list[Any] | None:
        async with served(fake) as aggregator:
            try:
                if call == "workers":
                    return await aggregator.workers()

                async def on_release(release: Any) -> None:
                    raise AssertionError("nothing was released")

                await aggregator.combiner.result(ROUND, 8, 5.0, on_release)
            except Exception as error:
                return error
        raise AssertionError("the call succeeded")

    said = asyncio.run(go())
    assert fake.calls == 1
    return said


@pytest.mark.parametrize("code", [
    *AWAY, *TOKEN_CODES, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL,
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION])
def test_a_result_refused_is_not_taken_for_the_service_away(code: grpc.StatusCode) -> None:
    said = answered(code, "result")
    if code in AWAY:
        assert isinstance(said, AggregatorUnavailable) and str(said) == code.name
        return
    assert isinstance(said, ControlTokenRefused if code in TOKEN_CODES else AggregatorRefused)
    assert str(said).startswith(f"the combiner refused GetResult ({code.name}: ")
    if code in TOKEN_CODES:
        assert "--control-token-file must hold the token the service was started with" \
            in str(said)


@pytest.mark.parametrize("code", [
    *AWAY, *TOKEN_CODES, grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNIMPLEMENTED])
def test_describe_workers_splits_its_failures_as_every_control_call(
        code: grpc.StatusCode) -> None:
    said = answered(code, "workers")
    if code == grpc.StatusCode.UNIMPLEMENTED:  # (a single aggregator)
        assert said is None
    elif code in AWAY:
        assert isinstance(said, AggregatorUnavailable) and str(said) == code.name
    else:  # (before: INTERNAL and INVALID_ARGUMENT were waited for as the service away)
        assert isinstance(said, ControlTokenRefused if code in TOKEN_CODES
                          else AggregatorRefused)
        assert str(said).startswith("the aggregation service refused DescribeWorkers "
                                    f"({code.name}: no); ")
