"""Telling the aggregation service that a sum it held was stored (CancelRound's ``delivered``,
``GrpcAggregator``'s ``delivered``), or that one is not to be read (its ``drop``): it is tried
again while the service cannot be reached, and never holds up the round driver that awaits it.
Before, one call was made and its failure ignored: a combiner killed as it came took the total
over at its restart, re-collected it from its workers and held it until its --result-ttl (600 s
by default). Fake combiner over gRPC."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from control_fake_kit import served

from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_coordinator import control
from fedhh_coordinator.aggregation import AggregatorRefused, AggregatorUnavailable

ROUND = b"r/1/1"


class Combiner(pb_grpc.CombinerControlServicer):
    """Answers CancelRound with ``answers`` in turn (a status code it fails with, or None:
    acknowledged), the last one from then on; ``hold`` (if set) is awaited first. ``told``:
    each call's ``delivered``."""

    def __init__(self, *answers: grpc.StatusCode | None) -> None:
        self.answers = list(answers)
        self.outcome_code = grpc.StatusCode.RESOURCE_EXHAUSTED  # (GetOutcome's answer)
        self.calls = 0
        self.acknowledged = asyncio.Event()
        self.hold: asyncio.Event | None = None
        self.told: list[bool] = []

    async def CancelRound(self, request: Any, context: Any) -> pb.CancelRoundResponse:
        assert bytes(request.round_id) == ROUND
        self.calls += 1
        self.told.append(request.delivered)
        if self.hold is not None:
            await self.hold.wait()
        answer = self.answers[min(self.calls, len(self.answers)) - 1]
        if answer is not None:
            await context.abort(answer, "not now")
        self.acknowledged.set()
        return pb.CancelRoundResponse(state=pb.AGGREGATION_STATE_RELEASED)

    async def GetOutcome(self, request: Any, context: Any) -> pb.GetOutcomeResponse:
        if self.outcome_code == grpc.StatusCode.OK:  # (an answer without a state)
            return pb.GetOutcomeResponse()
        await context.abort(self.outcome_code, "not now")


async def serve(fake: Combiner, go: Any) -> None:
    async with served(fake) as aggregator:
        await go(aggregator.combiner)


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "DELIVERY_RETRY_S", 0.01)
    monkeypatch.setattr(control, "DELIVERY_RETRY_MAX_S", 0.05)


def test_a_service_that_cannot_be_reached_is_told_once_it_answers() -> None:
    unavailable = grpc.StatusCode.UNAVAILABLE
    fake = Combiner(unavailable, unavailable, grpc.StatusCode.DEADLINE_EXCEEDED, None)

    async def go(service: Any) -> None:
        await service.delivered(ROUND)
        await asyncio.wait_for(fake.acknowledged.wait(), 30)

    asyncio.run(serve(fake, go))
    assert fake.calls == 4  # tried until acknowledged, then no more
    assert fake.told == [True] * 4


def test_a_sum_not_to_be_read_is_dropped_once_the_service_answers() -> None:
    # (a refused release, a charge that failed: before, one try, its failure ignored, and the
    # service held the sum until its --result-ttl)
    unavailable = grpc.StatusCode.UNAVAILABLE
    fake = Combiner(unavailable, grpc.StatusCode.DEADLINE_EXCEEDED, None)

    async def go(service: Any) -> None:
        fake.hold = asyncio.Event()
        await asyncio.wait_for(service.drop(ROUND), 5)  # (returns at once)
        fake.hold.set()
        await asyncio.wait_for(fake.acknowledged.wait(), 30)

    asyncio.run(serve(fake, go))
    assert fake.told == [False] * 3


def test_the_driver_is_not_held_up_by_a_service_that_does_not_answer() -> None:
    fake = Combiner(None)

    async def go(service: Any) -> None:
        fake.hold = asyncio.Event()
        # (the call waits in the service: before, the driver waited with it, up to 30 s)
        await asyncio.wait_for(service.delivered(ROUND), 5)
        fake.hold.set()
        await asyncio.wait_for(fake.acknowledged.wait(), 30)

    asyncio.run(serve(fake, go))
    assert fake.calls == 1


@pytest.mark.parametrize("code", [grpc.StatusCode.NOT_FOUND,
                                  grpc.StatusCode.UNAUTHENTICATED,
                                  grpc.StatusCode.PERMISSION_DENIED,
                                  # (the same at every try: before, tried for 600 s)
                                  grpc.StatusCode.UNIMPLEMENTED,
                                  grpc.StatusCode.INTERNAL])
def test_a_service_that_no_longer_knows_the_round_or_refuses_is_asked_once(
        code: grpc.StatusCode) -> None:
    fake = Combiner(code)

    async def go(service: Any) -> None:
        await service.delivered(ROUND)
        await asyncio.wait_for(asyncio.gather(*service._deliveries), 30)

    asyncio.run(serve(fake, go))
    assert fake.calls == 1 and not fake.acknowledged.is_set()


def test_the_tries_end_after_the_services_result_ttl(monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    monkeypatch.setattr(control, "DELIVERY_PATIENCE_S", 0.3)
    fake = Combiner(grpc.StatusCode.UNAVAILABLE)

    async def go(service: Any) -> None:
        await service.delivered(ROUND)
        await asyncio.wait_for(asyncio.gather(*service._deliveries), 30)

    asyncio.run(serve(fake, go))
    assert fake.calls >= 2 and not fake.acknowledged.is_set()


def test_a_failure_no_retry_expects_is_logged_not_left_in_the_task(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    fake = Combiner(None)

    async def go(service: Any) -> None:
        async def broken(*_: Any, **__: Any) -> None:
            raise RuntimeError("a bug")
        monkeypatch.setattr(service.client, "cancel", broken)
        await service.delivered(ROUND)
        tasks = list(service._deliveries)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)  # (before: raised RuntimeError)

    with caplog.at_level("ERROR", logger=control.log.name):
        asyncio.run(serve(fake, go))
    assert fake.calls == 0
    assert any("telling the combiner that a sum was stored failed" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize(("code", "away"), [
    (grpc.StatusCode.UNAVAILABLE, True), (grpc.StatusCode.DEADLINE_EXCEEDED, True),
    # (busy: its calls or a rate limit at that moment; before, a refusal: not asked again)
    (grpc.StatusCode.RESOURCE_EXHAUSTED, True),
    (grpc.StatusCode.PERMISSION_DENIED, False), (grpc.StatusCode.UNIMPLEMENTED, False),
    (grpc.StatusCode.INTERNAL, False)])
def test_a_round_cancel_refused_is_not_the_service_away(code: grpc.StatusCode,
                                                         away: bool) -> None:
    """The cancel of a round past its deadline, which the link tries again while the service
    is away (``AggregatorUnavailable``, for up to its recovery patience, 600 s): an answer no
    later try changes is a refusal, asked once, the round's outcome then deciding its
    charge. Before, every failure was the service away, and a service that refused the
    cancel was asked again for 10 minutes before the attempt settled."""
    fake = Combiner(code)

    async def go(combiner: Any) -> None:
        with pytest.raises(AggregatorUnavailable if away else AggregatorRefused,
                           match=code.name):
            await combiner.cancel(ROUND)

    asyncio.run(serve(fake, go))
    assert fake.calls == 1


def test_an_outcome_answered_busy_is_the_service_away() -> None:
    """GetOutcome answered RESOURCE_EXHAUSTED (its load at that moment) is asked again by the
    link, as while the service cannot be reached. Before, it went through the link's
    patience, which waits on ``AggregatorUnavailable`` alone, and failed the run."""
    fake = Combiner(None)

    async def go(combiner: Any) -> None:
        with pytest.raises(AggregatorUnavailable, match="RESOURCE_EXHAUSTED"):
            await combiner.outcome(ROUND)

    asyncio.run(serve(fake, go))


REMEDIES = {
    grpc.StatusCode.UNAUTHENTICATED: "--control-token-file must hold the token",
    grpc.StatusCode.PERMISSION_DENIED: "--control-token-file must hold the token",
    grpc.StatusCode.UNIMPLEMENTED: "--aggregator must name a fedhh aggregator or combiner",
    grpc.StatusCode.OK: "the service's fedhh version must be the coordinator's",
}


@pytest.mark.parametrize(("code", "away"), [
    (grpc.StatusCode.UNAVAILABLE, True), (grpc.StatusCode.DEADLINE_EXCEEDED, True),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, True),
    (grpc.StatusCode.UNAUTHENTICATED, False), (grpc.StatusCode.PERMISSION_DENIED, False),
    (grpc.StatusCode.UNIMPLEMENTED, False), (grpc.StatusCode.INVALID_ARGUMENT, False),
    (grpc.StatusCode.FAILED_PRECONDITION, False), (grpc.StatusCode.NOT_FOUND, False),
    (grpc.StatusCode.INTERNAL, False),
    (grpc.StatusCode.OK, False)])  # (OK: an answer that breaks the wire contract)
def test_an_outcome_refused_is_said_in_words_not_taken_for_the_service_away(
        code: grpc.StatusCode, away: bool) -> None:
    """GetOutcome, which the link asks again while the service is away
    (``AggregatorUnavailable``, for up to its recovery patience, 600 s): an answer no later
    try changes is ``AggregatorRefused``, naming the service, the call, the status and what
    the operator does, so that the link settles the round at once. Before, every gRPC status
    and a malformed answer read as the service away, asked again for 600 s, and a status the
    client maps to its own error (UNAUTHENTICATED, INVALID_ARGUMENT, FAILED_PRECONDITION,
    NOT_FOUND) escaped as that error, which failed the run."""
    fake = Combiner(None)
    fake.outcome_code = code

    async def go(combiner: Any) -> None:
        with pytest.raises(AggregatorUnavailable if away else AggregatorRefused) as raised:
            await combiner.outcome(ROUND)
        said = str(raised.value)
        if away:
            assert said == code.name
            return
        assert said.startswith(
            "the combiner answered GetOutcome against the wire contract (" if code ==
            grpc.StatusCode.OK else f"the combiner refused GetOutcome ({code.name}: not now)")
        assert REMEDIES.get(code, "the service's log says why") in said

    asyncio.run(serve(fake, go))
