"""Attacks on the session stream (``SecureAggregation.Session``), against an aggregator on
127.0.0.1, on its gRPC port and on its framed session port (``fedhh.rpc.framed``): the stream
is authenticated once, by a signature over a challenge fresh for that stream, so every way of
opening it in another device's name is refused UNAUTHENTICATED; a message that is not the
stream's device's, malformed, or too large is refused with its code; a second stream of a
device replaces the first. Each leaves the round as it was: the devices then release exactly
their sum.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import socket
from typing import Any

import grpc
import numpy as np
import pytest
from aggregator_testkit import (
    TOKEN,
    TRANSPORTS,
    Cohort,
    aggregator,
    expect_status,
    make_cohort,
    run,
    session_stub,
)

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.aggregator_wire import admission_to_pb, keys_to_pb, session_open
from fedhh.rpc.device_client import ParticipationEnd as End
from fedhh.rpc.device_client import participate
from fedhh.rpc.framed.frames import HEADER, PREFACE, Kind
from fedhh.secagg.primitives import ed25519_from_seed
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh.v1.framed_pb2 import FramedOpen
from fedhh_aggregator.errors import OpenTimeout
from fedhh_aggregator.rounds import Limits

N = 8
OTHER_KEY = ed25519_from_seed(b"\x07" * 32)


def _cohort(round_id: bytes, seed: int = 0, **kw: Any) -> Cohort:
    return make_cohort(N, 256, N - 1, 5, n_min=5, windows_ms=(30_000,) * 5,
                       consistency_check=True, round_id=round_id, seed=seed, **kw)


async def _challenge(stub: Any) -> tuple[Any, bytes]:
    call = stub.Session(timeout=30)
    event = await call.read()
    assert event.WhichOneof("event") == "challenge" and len(event.challenge) == 32
    return call, event.challenge


async def _refused(call: Any, *messages: pb.SessionMessage) -> tuple[grpc.StatusCode, str]:
    """Send ``messages``; the stream must be refused: its ``refused`` event, then (once this
    side has closed) the same code as its status."""
    for message in messages:
        await call.write(message)
    event = await call.read()
    assert event.WhichOneof("event") == "refused", event
    await call.done_writing()
    code, details = await call.code(), await call.details()
    assert code.value[0] == event.refused.code and details == event.refused.details
    assert details and "\n" not in details and "Traceback" not in details, details
    return code, details


def _open(cohort: Cohort, u: int, challenge: bytes, **kw: Any) -> pb.SessionMessage:
    return pb.SessionMessage(open=session_open(
        kw.get("key", cohort.identity_keys[u]), kw.get("admission", cohort.admissions[u]),
        kw.get("session_id", cohort.session_id), challenge))


async def _released_exactly(channel: grpc.aio.Channel, stub: Any, cohort: Cohort) -> None:
    """Every device takes part through ``stub`` (its session streams); the round releases
    exactly their sum."""
    control = AggregatorControl(channel, TOKEN)
    fetch = asyncio.create_task(control.result(cohort.round_id, 60))
    outcomes = await asyncio.gather(*(
        participate(stub, cohort.device(u), cohort.reports[u],
                    identity_key=cohort.identity_keys[u], admission=cohort.admissions[u])
        for u in range(1, N + 1)))
    result = await fetch
    assert all(o.contributed and o.outcome in (End.COMPLETED, End.LATE) for o in outcomes), \
        outcomes
    assert result.survivors == tuple(range(1, N + 1))
    assert np.array_equal(result.total.astype(np.int64),
                          cohort.plaintext_sum(set(range(1, N + 1))))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_stream_cannot_be_opened_in_another_devices_name(transport: str) -> None:
    """A replayed open (signed for another stream's challenge), an open signed by another key,
    one with another round's admission or naming another round, one with a device's admission
    but signed by its neighbour: UNAUTHENTICATED (or NOT_FOUND for an unknown round), each
    before anything reaches the round, even marked to advertise the admission's keys; then
    the round releases exactly its devices' sum."""
    a = _cohort(b"stream-sec/a", seed=1)
    b = _cohort(b"stream-sec/b", seed=2, identity_keys=a.identity_keys)
    unauth = grpc.StatusCode.UNAUTHENTICATED

    def advertising(message: pb.SessionMessage) -> pb.SessionMessage:
        message.open.advertise = True
        return message

    async def scenario() -> None:
        async with aggregator() as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(a.signed)
            await control.open_round(b.signed)
            stub = session_stub(agg, channel, transport)
            # A genuine open of device 1, on its own stream (then left).
            call, challenge = await _challenge(stub)
            genuine = _open(a, 1, challenge)
            await call.write(genuine)
            await call.write(pb.SessionMessage(keys=keys_to_pb(a.device(1).advertise_keys())))
            round_a = agg.registry.by_session(a.session_id)
            while round_a.server.received() < 1:  # (a cancel before the keys were read would
                await asyncio.sleep(0)            # take them with it)
            call.cancel()
            # Replayed on a new stream: its signature names the old challenge.
            call, _ = await _challenge(stub)
            assert (await _refused(call, genuine))[0] == unauth
            call, _ = await _challenge(stub)
            assert (await _refused(call, advertising(genuine)))[0] == unauth
            # Signed by a key that is not the admitted one.
            call, challenge = await _challenge(stub)
            assert (await _refused(call, _open(a, 1, challenge, key=OTHER_KEY)))[0] == unauth
            # Device 2's admission, signed by device 1 (a neighbour), with or without its keys.
            for forged in (lambda m: m, advertising):
                call, challenge = await _challenge(stub)
                assert (await _refused(call, forged(_open(
                    a, 2, challenge, key=a.identity_keys[1]))))[0] == unauth
            assert round_a.server.received() == 1  # device 1's
            # Round B's admission (same identity key) into round A, and A's open into B.
            call, challenge = await _challenge(stub)
            assert (await _refused(call, _open(a, 1, challenge,
                                               admission=b.admissions[1])))[0] == unauth
            call, challenge = await _challenge(stub)
            moved = _open(a, 1, challenge)
            moved.open.session_id = b.session_id
            assert (await _refused(call, moved))[0] == unauth
            # An unknown round; no admission; a message before the open.
            call, challenge = await _challenge(stub)
            assert (await _refused(call, _open(a, 1, challenge, session_id=bytes(32))))[0] \
                == grpc.StatusCode.NOT_FOUND
            call, challenge = await _challenge(stub)
            bare = _open(a, 1, challenge)
            bare.open.ClearField("admission")
            assert (await _refused(call, bare))[0] == unauth
            call, _ = await _challenge(stub)
            assert (await _refused(call, pb.SessionMessage(
                keys=keys_to_pb(a.device(1).advertise_keys()))))[0] == \
                grpc.StatusCode.INVALID_ARGUMENT
            await _released_exactly(channel, stub, a)

    run(scenario(), timeout=120)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_authenticated_stream_speaks_only_for_its_device_and_refuses_bad_input(
        transport: str) -> None:
    """On device 1's authenticated stream: device 2's keys (with device 2's own admission) are
    UNAUTHENTICATED; a second open, vector data out of place, an empty message, a vector of the
    wrong length are INVALID_ARGUMENT; an oversize message RESOURCE_EXHAUSTED. None changes the
    round, which then releases exactly its devices' sum."""
    a = _cohort(b"stream-sec/input", seed=3)

    async def scenario() -> None:
        async with aggregator() as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(a.signed)
            stub = session_stub(agg, channel, transport)

            async def opened() -> Any:
                call, challenge = await _challenge(stub)
                await call.write(_open(a, 1, challenge))
                return call

            other_keys = keys_to_pb(a.device(2).advertise_keys())
            codes = [
                await _refused(await opened(), pb.SessionMessage(keys=other_keys)),
                await _refused(await opened(), _open(a, 1, b"\x00" * 32)),
                await _refused(await opened(), pb.SessionMessage(vector_data=b"\x01")),
                await _refused(await opened(), pb.SessionMessage()),
            ]
            own = keys_to_pb(a.device(1).advertise_keys())
            own.admission.CopyFrom(admission_to_pb(a.admissions[2]))  # another's admission
            codes.append(await _refused(await opened(), pb.SessionMessage(keys=own)))
            wrong = pb.SessionMessage()
            wrong.masked_vector.total_bytes = 3
            wrong.masked_vector.vector_sha256 = bytes(32)
            wrong.masked_vector.data = b"abc"
            codes.append(await _refused(await opened(), wrong))
            assert [c for c, _ in codes] == [
                grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INVALID_ARGUMENT], codes
            # Above the receive cap: refused before it is parsed.
            call = await opened()
            await call.write(pb.SessionMessage(vector_data=bytes(2 << 20)))
            await expect_status(grpc.StatusCode.RESOURCE_EXHAUSTED, call.read())
            await _released_exactly(channel, stub, a)

    run(scenario(), timeout=120)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_second_stream_of_a_device_replaces_the_first(transport: str) -> None:
    """Device 1 opens a stream and advertises; a second authenticated stream of device 1
    (its reconnect) replaces it: the first ends ALREADY_EXISTS, told in its refusal, and the
    device goes on on the second, which the round counts once."""
    a = _cohort(b"stream-sec/replace", seed=4)

    async def scenario() -> None:
        async with aggregator() as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(a.signed)
            stub = session_stub(agg, channel, transport)
            first, challenge = await _challenge(stub)
            await first.write(_open(a, 1, challenge))
            await first.write(pb.SessionMessage(keys=keys_to_pb(a.device(1).advertise_keys())))
            round_ = agg.registry.by_session(a.session_id)
            # (the first stream is the device's once the aggregator has its keys)
            while round_.server.received() < 1:
                await asyncio.sleep(0)
            assert 1 in round_.streams
            # participate() opens device 1's second stream (and the others' first).
            done = asyncio.create_task(_released_exactly(channel, stub, a))
            event = await first.read()
            assert event.WhichOneof("event") == "refused", event
            assert event.refused.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
            assert "replaced" in event.refused.details
            await first.done_writing()
            assert await first.code() == grpc.StatusCode.ALREADY_EXISTS
            await done

    run(scenario(), timeout=120)


def test_a_client_that_never_reads_holds_no_session_handler() -> None:
    """On the framed session port, a client that sends OPENs and never reads (9.2 MB of
    them): the port stops reading it once its answers back up (challenges, and ENDs past the
    streams per connection), and each handler it made ends within about twice upload_idle_s
    (no open, or the challenge not even taken: OpenTimeout), so it holds none; the round then
    releases exactly its devices' sum over the port."""
    a = _cohort(b"stream-sec/no-reader", seed=5)

    async def scenario() -> None:
        async with aggregator(Limits(upload_idle_s=0.5)) as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(a.signed)
            assert agg.sessions is not None and agg.session_port is not None
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", agg.session_port))
            sock.setblocking(False)
            _, writer = await asyncio.open_connection(sock=sock)
            opening = FramedOpen(method="/fedhh.v1.SecureAggregation/Session").SerializeToString()
            writer.write(PREFACE + b"".join(HEADER.pack(i, Kind.OPEN, len(opening)) + opening
                                            for i in range(1, 200_001)))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not (agg.sessions.connections and all(
                    not c._reading and not c.streams for c in agg.sessions.connections)):
                assert loop.time() < deadline, [
                    (c._reading, len(c.streams)) for c in agg.sessions.connections]
                await asyncio.sleep(0.05)  # (polling the port's state; bounded above)
            [connection] = agg.sessions.connections
            assert connection._last_id < 200_000  # (not every OPEN was read)
            await _released_exactly(channel, session_stub(agg, channel, "framed"), a)
            writer.transport.abort()

    run(scenario(), timeout=120)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_streams_that_never_open_leave_no_cyclic_garbage(transport: str) -> None:
    """Anyone may open a session stream; one that never sends its open ends at upload_idle_s
    (OpenTimeout) and must leave nothing for the cycle collector: the services run it seldom
    (``serving.tune_gc``), so a reference cycle per ended stream (the timeout's exception held
    by the frame that raised it) grew a worker by ~6 KB a stream, gigabytes under a flood."""
    a = _cohort(b"stream-sec/no-open", seed=6)

    async def scenario() -> None:
        async with aggregator(Limits(upload_idle_s=0.3)) as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(a.signed)
            stub = session_stub(agg, channel, transport)
            gc.disable()  # what only the collector could free stays for the check below
            try:
                calls = [(await _challenge(stub))[0] for _ in range(20)]
                for call in calls:
                    event = await call.read()
                    assert event.WhichOneof("event") == "refused"
                    assert "no open within" in event.refused.details
                    await call.done_writing()
                    assert (await call.code()).value[0] == event.refused.code
                del calls, call, event
                gc.set_debug(gc.DEBUG_SAVEALL)
                gc.collect()
                left = [o for o in gc.garbage if isinstance(o, OpenTimeout) or (
                    inspect.isframe(o) and o.f_code.co_filename.endswith("session_stream.py"))]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
            assert not left, left[:5]
            await _released_exactly(channel, stub, a)

    run(scenario(), timeout=120)


def test_streams_waiting_for_their_opens_are_capped_over_both_ports() -> None:
    """A session stream's device is nobody until its open, so streams of nobody were bounded
    only per connection (4,096), over any number of connections, ~10 KB each. Now at most
    max_unopened_sessions streams of a worker, on its gRPC and framed ports together, wait for
    their opens: one more is refused UNAVAILABLE at once (devices retry it). A place comes
    back when the open arrives, when the stream ends without one (its client gone, or
    upload_idle_s passed), and the devices then release exactly their sum."""
    a = _cohort(b"stream-sec/unopened", seed=7)

    async def scenario() -> None:
        async with aggregator(Limits(upload_idle_s=2.0, max_unopened_sessions=3)) as (
                agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(a.signed)
            unopened = agg.registry.unopened
            grpc_stub = session_stub(agg, channel, "grpc")
            framed_stub = session_stub(agg, channel, "framed")
            held = [(await _challenge(stub))[0] for stub in (grpc_stub, framed_stub, grpc_stub)]
            assert unopened.waiting == 3
            busy = (grpc.StatusCode.UNAVAILABLE, "busy: 3 session streams wait for their "
                    "devices' opens here; retry after a backoff")
            for stub in (grpc_stub, framed_stub):
                call = stub.Session(timeout=30)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call.read()
                assert (refused.value.code(), refused.value.details()) == busy
            held[0].cancel()  # a client gone: its place back
            deadline = asyncio.get_running_loop().time() + 30
            while unopened.waiting != 2:
                assert asyncio.get_running_loop().time() < deadline, unopened.waiting
                await asyncio.sleep(0.01)  # (polling the worker's count; bounded above)
            # An open gives its place back: the stream goes on as its device's.
            late, challenge = await _challenge(grpc_stub)
            assert unopened.waiting == 3
            await late.write(_open(a, 1, challenge))
            while unopened.waiting != 2:
                assert asyncio.get_running_loop().time() < deadline, unopened.waiting
                await asyncio.sleep(0.01)
            late.cancel()
            for call in held[1:]:  # no open within upload_idle_s: ended, places back
                event = await call.read()
                assert event.WhichOneof("event") == "refused"
                assert "no open within" in event.refused.details
                await call.done_writing()
            while unopened.waiting:
                assert asyncio.get_running_loop().time() < deadline, unopened.waiting
                await asyncio.sleep(0.01)
            await _released_exactly(channel, framed_stub, a)
            assert unopened.waiting == 0

    run(scenario(), timeout=120)


MANY = 200_000  # empty share entries: 400 KB, under the receive cap


def _long_lists(count: int) -> list[pb.SessionMessage]:
    """Session messages of ``count`` share entries, one of each list a device sends."""
    out = []
    for part, name in (("shares", "shares"), ("shares", "dsts"), ("unmask", "b_shares"),
                       ("unmask", "s_shares"), ("unmask", "b_owners"),
                       ("unmask", "s_owners")):
        message = pb.SessionMessage()
        entries = getattr(getattr(message, part), name)
        if name == "dsts" or name.endswith("owners"):
            entries.extend([1] * count)
        else:
            for _ in range(count):
                entries.add()
        out.append(message)
    return out


def _refused_for_length(details: str, count: int) -> None:
    assert f"{count} share entries" in details and f"k = {N - 1}" in details, details


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_share_list_longer_than_k_is_refused_before_it_is_converted(transport: str) -> None:
    """A device's shares go to its roster neighbours and its unmask shares name some of them,
    at most k (an arc of k + 1 ring positions of H(k, n)). On device 1's authenticated stream,
    each list of 200,000 entries (shares one by one or packed, unmask shares of either kind,
    one by one or packed), and one of k + 1, is refused INVALID_ARGUMENT naming its length and
    k, before its entries are made into objects: before, a 1 MiB message of 520,000 empty
    shares held the worker's event loop 1 to 3 s before the library refused it (or found its
    stage not open), once per stream the device opened. The round then releases exactly."""
    a = _cohort(b"stream-sec/share-lists", seed=8)

    async def scenario() -> None:
        async with aggregator() as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(a.signed)
            stub = session_stub(agg, channel, transport)
            for count, message in [(MANY, m) for m in _long_lists(MANY)] + [
                    (N, _long_lists(N)[0])]:
                call, challenge = await _challenge(stub)
                await call.write(_open(a, 1, challenge))
                code, details = await _refused(call, message)
                assert code == grpc.StatusCode.INVALID_ARGUMENT
                _refused_for_length(details, count)
            await _released_exactly(channel, stub, a)

    run(scenario(), timeout=120)


def test_a_unary_share_list_longer_than_k_is_refused_before_it_is_converted() -> None:
    """The same lists on the unary calls (SubmitShares, SubmitUnmask) with device 1's
    admission: refused INVALID_ARGUMENT naming the length and k (before, the entries were
    converted, and only then the call's signature checked)."""
    a = _cohort(b"stream-sec/unary-share-lists", seed=9)

    async def scenario() -> None:
        async with aggregator() as (agg, channel):
            await AggregatorControl(channel, TOKEN).open_round(a.signed)
            stub = pb_grpc.SecureAggregationStub(channel)
            creds = pb.DeviceCredentials(admission=admission_to_pb(a.admissions[1]),
                                         signature=bytes(64))
            shares = pb.SubmitSharesRequest(session_id=a.session_id, credentials=creds,
                                            b_commitment=bytes(32))
            unmask = pb.SubmitUnmaskRequest(session_id=a.session_id, credentials=creds)
            for _ in range(MANY):
                shares.shares.add()
                unmask.s_shares.add()
            for call in (stub.SubmitShares(shares), stub.SubmitUnmask(unmask)):
                _refused_for_length(
                    await expect_status(grpc.StatusCode.INVALID_ARGUMENT, call), MANY)
            await _released_exactly(channel, session_stub(agg, channel, "grpc"), a)

    run(scenario(), timeout=120)
