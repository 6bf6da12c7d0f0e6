"""A device process's devices leave a round the aggregator aborted as soon as one of them is
told, with real gRPC to an in-process aggregator on 127.0.0.1: a device whose stage request
came in but whose answer was still queued for its turn to compute does not compute it
(``ComputeTurns.round_aborted``). Before, it computed and sent it, and only the aggregator's
refusal told it the round was over; on a loaded host a device process's hundreds of such
answers delayed its devices' return to the next attempt's check-in."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from aggregator_testkit import TOKEN, aggregator, close_once_the_rest_answered, make_cohort, run

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.aggregator_wire import stage_to_pb
from fedhh.rpc.device_client import ParticipationEnd as End
from fedhh.rpc.device_client import RetryPolicy, Transport, participate
from fedhh.rpc.participation import ComputeTurns
from fedhh.secagg import Stage
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

NO_WAIT = RetryPolicy(initial_backoff_s=0.0, max_backoff_s=0.0)


class _HeldRequests:
    """A stub whose streams hand the device its share-keys request only once ``gate`` is set
    (a device process far behind: the request is in, its device's turn has not come)."""

    def __init__(self, stub: Any, gate: asyncio.Event) -> None:
        self._stub = stub
        self._gate = gate

    def Session(self, **kwargs: Any) -> Any:
        return _HeldCall(self._stub.Session(**kwargs), self._gate)


class _HeldCall:
    def __init__(self, call: Any, gate: asyncio.Event) -> None:
        self._call = call
        self._gate = gate

    async def read(self) -> Any:
        event = await self._call.read()
        if (event is not grpc.aio.EOF and event.WhichOneof("event") == "next"
                and event.stage == stage_to_pb(Stage.SHARE_KEYS)):
            await self._gate.wait()
        return event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


def test_an_answer_queued_for_an_aborted_round_is_not_computed() -> None:
    # Six devices, n_min 6: device 6 holds its shares back, so the round aborts when the
    # share-keys stage closes, once the other five shared (before: at a deadline 5 s in, which
    # all six had to advertise by); devices 1-5 are told (their wait for the next request).
    cohort = make_cohort(6, 64, 5, 4, n_min=6, round_id=b"held/6")
    late = cohort.device(6)
    computed: list[int] = []
    share_keys = late.share_keys

    def counted(request: Any) -> Any:
        computed.append(6)
        return share_keys(request)

    late.share_keys = counted  # type: ignore[method-assign]

    async def scenario() -> tuple[list[Any], Any]:
        async with aggregator() as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            close_once_the_rest_answered(agg.registry.by_session(cohort.session_id),
                                         {6: Stage.SHARE_KEYS})
            turns, gate = ComputeTurns(), asyncio.Event()
            stub = pb_grpc.SecureAggregationStub(channel)

            def device(u: int, through: Any) -> Any:
                return participate(through, late if u == 6 else cohort.device(u),
                                   cohort.reports[u], identity_key=cohort.identity_keys[u],
                                   admission=cohort.admissions[u], transport=Transport.STREAM,
                                   retry=NO_WAIT, computing=turns)

            held = asyncio.create_task(device(6, _HeldRequests(stub, gate)))
            told = await asyncio.gather(*(device(u, stub) for u in range(1, 6)))
            gate.set()  # device 6's request reaches it after the others heard of the abort
            return told, await held

    told, held = run(scenario())
    assert [t.outcome for t in told] == [End.ROUND_ABORTED] * 5, told
    assert held.outcome is End.ROUND_ABORTED, held
    assert "another device of this process" in held.detail, held
    assert computed == []
