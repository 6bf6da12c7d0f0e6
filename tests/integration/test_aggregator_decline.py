"""A cohort member that refuses its task gives up its seat (``SecureAggregation.Decline``) on a
real aggregator over gRPC and over its Connect port (the web devices' calls): the first stage
closes as soon as the other members advertised, not at its deadline (ten minutes here; the
scenario is bounded by ``run``'s 60 s, so a round that waited for the deadline fails), and the
others' sum is released. A decline must be the admitted device's own, signed for this call and
this round: forged, borrowed or misdirected ones are refused and change nothing; a repeat
changes nothing; one after the device advertised is refused.

Before, a device that refused a task (its floors, its budget) sent nothing at all: the round
waited for it to the first stage's deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import numpy as np
import pytest
from aggregator_testkit import (
    COORDINATOR_PUBLIC,
    TOKEN,
    Cohort,
    expect_status,
    make_cohort,
    run,
    take_part,
)
from prometheus_client import REGISTRY

from fedhh.rpc.aggregator_client import AggregatorControl, open_channel
from fedhh.rpc.aggregator_wire import CallKind, await_digest, credentials, keys_to_pb
from fedhh.rpc.connect_client import ConnectChannel, ConnectStub
from fedhh.rpc.device_client import SessionResult, decline
from fedhh.secagg import Stage
from fedhh.secagg.primitives import ed25519_from_seed
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.main import AggregatorSettings, start
from fedhh_aggregator.service import RunningService

N = 6
DECLINING = 6
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
SERVICE = pb.DESCRIPTOR.services_by_name["SecureAggregation"]


def _declined() -> float:
    return REGISTRY.get_sample_value("fedhh_aggregator_device_messages_total",
                                     {"stage": "ADVERTISE_KEYS", "outcome": "declined"}) or 0.0


def _cohort(round_id: bytes) -> Cohort:
    # Every stage's deadline ten minutes apart: only an early close ends one within the test.
    return make_cohort(N, 32, 5, 3, n_min=4, windows_ms=(600_000,) * 5, round_id=round_id)


@asynccontextmanager
async def _aggregator() -> AsyncIterator[tuple[RunningService[Any], grpc.aio.Channel, Any]]:
    """An aggregator on 127.0.0.1 with its Connect port (OS-chosen ports), a gRPC channel to
    it and a Connect stub of its device calls."""
    agg = await start(AggregatorSettings(coordinator_public=COORDINATOR_PUBLIC,
                                         control_token=TOKEN, listen="127.0.0.1:0",
                                         insecure=True, web_listen="127.0.0.1:0"))
    assert agg.web is not None
    channel = open_channel(f"127.0.0.1:{agg.port}")
    web = ConnectStub(ConnectChannel(f"127.0.0.1:{agg.web.port}", insecure=True), SERVICE)
    try:
        yield agg, channel, web
    finally:
        await web.close()
        await channel.close()
        await agg.stop(grace=0.5)


def _request(cohort: Cohort, u: int, *, key: int | None = None, kind: CallKind = CallKind.DECLINE,
             digest: bytes = b"", session: bytes | None = None) -> pb.DeclineRequest:
    """Device ``u``'s decline, signed by device ``key``'s identity key (``u``'s by default)
    as a call of ``kind`` over ``digest`` in round ``session``."""
    signer = cohort.identity_keys[key or u]
    sid = session or cohort.session_id
    return pb.DeclineRequest(session_id=cohort.session_id, credentials=credentials(
        signer, cohort.admissions[u], kind, sid, digest))


@pytest.mark.parametrize("port", ["grpc", "connect"])
def test_a_declined_seat_releases_the_round_without_waiting_its_deadline(port: str) -> None:
    cohort = _cohort(f"run/decline/{port}".encode())
    declined_before = _declined()

    async def scenario() -> tuple[Any, list[SessionResult], bool, pb.SubmitResponse, Any]:
        async with _aggregator() as (_, channel, web):
            stub = pb_grpc.SecureAggregationStub(channel) if port == "grpc" else web
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            declined = await decline(stub, cohort.session_id,
                                     identity_key=cohort.identity_keys[DECLINING],
                                     admission=cohort.admissions[DECLINING])
            # The same call again (a replay, or a retry whose answer was lost): nothing changes.
            again = await stub.Decline(_request(cohort, DECLINING))
            outcomes = await take_part(channel, cohort, range(1, N))
            result = await control.result(cohort.round_id, 30)
            return result, outcomes, declined, again, await control.outcome(cohort.round_id)

    result, outcomes, declined, again, outcome = run(scenario())
    assert declined is True
    assert again.accepted is False
    assert all(o.contributed for o in outcomes), outcomes
    assert result.num_contributors == N - 1
    assert np.array_equal(result.total.astype(np.int64),
                          cohort.plaintext_sum(set(range(1, N))))
    assert _declined() == declined_before + 1
    # The round's outcome counts the seat given up (the coordinator names it in a too-few
    # abort's reason), the repeat not again.
    assert outcome.declined == 1


def test_forged_borrowed_and_misdirected_declines_are_refused_and_change_nothing() -> None:
    cohort = _cohort(b"run/decline/forged")
    other = _cohort(b"run/decline/other")

    async def scenario() -> None:
        async with _aggregator() as (agg, channel, _):
            stub = pb_grpc.SecureAggregationStub(channel)
            await AggregatorControl(channel, TOKEN).open_round(cohort.signed)
            round_ = agg.registry.by_session(cohort.session_id)
            forged = _request(cohort, DECLINING)
            forged.credentials.signature = ed25519_from_seed(b"\x09" * 32).sign(b"decline")
            attempts = {
                # another member signs for the declining member's seat
                "another member's key": _request(cohort, DECLINING, key=1),
                "a signature of no member": forged,
                # the device's signed AwaitStage call, replayed as a decline
                "another call's signature": _request(
                    cohort, DECLINING, kind=CallKind.AWAIT,
                    digest=await_digest(Stage.SHARE_KEYS)),
                # the device's decline of another round, replayed in this one
                "another round's decline": _request(cohort, DECLINING,
                                                    session=other.session_id),
            }
            for what, request in attempts.items():
                details = await expect_status(UNAUTHENTICATED, stub.Decline(request))
                assert details, what
            no_credentials = pb.DeclineRequest(session_id=cohort.session_id)
            await expect_status(UNAUTHENTICATED, stub.Decline(no_credentials))
            # A decline of a round this aggregator does not hold.
            await expect_status(grpc.StatusCode.NOT_FOUND, stub.Decline(
                _request(other, DECLINING)))
            assert round_.server.expected_count() == N  # nobody's seat was released
            control = AggregatorControl(channel, TOKEN)
            assert (await control.outcome(cohort.round_id)).declined == 0
            # A member that advertised its keys cannot decline: its neighbours count on it.
            advertised = await stub.AdvertiseKeys(pb.AdvertiseKeysRequest(
                session_id=cohort.session_id, keys=keys_to_pb(cohort.device(1).advertise_keys())))
            assert advertised.accepted
            await expect_status(grpc.StatusCode.FAILED_PRECONDITION,
                                stub.Decline(_request(cohort, 1)))
            assert round_.server.expected_count() == N

    run(scenario())

