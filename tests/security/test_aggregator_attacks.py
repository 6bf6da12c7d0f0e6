"""Attacks on the aggregator, against the real ``fedhh aggregator`` process (issue 10, "limits
before work" and tests/security): oversize and truncated messages, replays of another round's
messages, impersonation, messages for the wrong stage, a long-poll flood and a trickling
upload. Each is refused with its status code and a one-line reason (never INTERNAL or
UNKNOWN), and a round running alongside still releases exactly the sum of the honest devices.

The aggregator runs as its own process on 127.0.0.1 (OS-chosen port); the devices are the real
client code (``fedhh.rpc.aggregator_client``) in the test process.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from aggregator_testkit import (
    TOKEN,
    AggregatorProcess,
    Cohort,
    expect_status,
    make_cohort,
    run,
    session,
)

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.aggregator_wire import (
    CallKind,
    admission_to_pb,
    await_digest,
    credentials,
    header_digest,
    keys_to_pb,
    stage_to_pb,
)
from fedhh.rpc.connect_client import ConnectChannel, ConnectStub
from fedhh.rpc.device_client import SessionResult, participate
from fedhh.rpc.framed.frames import PREFACE
from fedhh.secagg import AggregateResult, MaskedInputRequest, Stage
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

INVALID = grpc.StatusCode.INVALID_ARGUMENT
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
NOT_NOW = grpc.StatusCode.FAILED_PRECONDITION
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
MD = (("authorization", f"Bearer {TOKEN.decode()}"),)
N = 8


def _cohort(round_id: bytes, dimension: int = 64, seed: int = 0,
            windows_ms: tuple[int, int, int, int, int] = (600_000,) * 5, **kw: Any) -> Cohort:
    # (stages far apart, as make_cohort's: they close once every device has answered, and
    # the windows start before the aggregator's process does, which a busy machine slows)
    # k = n - 1 = 7 and t = 5 > (k + 1) / 2: lying-server parameters for up to one colluder.
    return make_cohort(N, dimension, N - 1, 5, n_min=5, windows_ms=windows_ms,
                       consistency_check=True, round_id=round_id, seed=seed, **kw)


class _Gated:
    """A devices' stub whose masked-vector uploads wait for ``gate`` (so an attacker's uploads
    are in place first)."""

    def __init__(self, channel: grpc.aio.Channel, gate: asyncio.Event) -> None:
        self._stub = pb_grpc.SecureAggregationStub(channel)
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)
        if name not in ("SubmitMaskedVector", "SubmitMaskedInput"):
            return method

        async def gated(request: Any, **kwargs: Any) -> Any:
            await self._gate.wait()
            return await method(request, **kwargs)
        return gated


async def _everyone(channel: grpc.aio.Channel, cohort: Cohort, ids: Iterable[int],
                    stub: Any = None) -> dict[int, SessionResult]:
    ids = list(ids)
    outcomes = await asyncio.gather(*(
        participate(stub or channel, cohort.device(u), cohort.reports[u],
                    identity_key=cohort.identity_keys[u], admission=cohort.admissions[u])
        for u in ids))
    return dict(zip(ids, outcomes, strict=True))


async def _released_exactly(channel: grpc.aio.Channel, cohort: Cohort,
                            ids: Iterable[int], stub: Any = None) -> AggregateResult:
    """Run ``ids`` through the round; the release must be exactly their plaintext sum."""
    ids = list(ids)
    control = AggregatorControl(channel, TOKEN)
    fetch = asyncio.create_task(control.result(cohort.round_id, 60))
    outcomes = await _everyone(channel, cohort, ids, stub)
    result = await fetch
    assert all(o.contributed for o in outcomes.values()), outcomes
    assert result.survivors == tuple(ids)
    assert np.array_equal(result.total.astype(np.int64), cohort.plaintext_sum(ids))
    return result


def _one_line(details: str) -> None:
    assert details and "\n" not in details and "Traceback" not in details, details


# -- oversize and truncated messages ---------------------------------------------------------

def test_oversize_messages_are_refused_before_they_are_parsed(tmp_path: Path) -> None:
    """The receive cap is the contract's largest message (a 1 MiB vector plus its header), not
    gRPC's 16 MiB: a larger message costs the service no parsing and no memory. A vector of
    exactly 1 MiB in one message still goes through."""
    cohort = _cohort(b"sec/oversize", dimension=1 << 19)  # 1 MiB vectors
    big = bytes(2 << 20)

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            stub = pb_grpc.SecureAggregationStub(channel)
            raw = pb_grpc.AggregatorControlStub(channel)
            sid = cohort.session_id
            for call in (
                stub.SubmitShares(pb.SubmitSharesRequest(session_id=sid, b_commitment=big)),
                stub.SubmitMaskedVector(pb.MaskedVector(data=bytes((1 << 20) + (32 << 10)))),
                stub.AdvertiseKeys(pb.AdvertiseKeysRequest(session_id=big)),
                raw.OpenRound(pb.OpenRoundRequest(config=big), metadata=MD),
                raw.GetOutcome(pb.GetOutcomeRequest(round_id=big), metadata=MD),
            ):
                _one_line(await expect_status(EXHAUSTED, call))
            await _released_exactly(channel, cohort, range(1, N + 1))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=120)


def _truncated(message: Any) -> bytes:
    data = message.SerializeToString()
    assert len(data) > 2
    return data[:-1]  # cuts the last (length-delimited) field short


def test_truncated_and_garbage_protobufs_are_invalid_argument(tmp_path: Path) -> None:
    cohort = _cohort(b"sec/truncated")
    sid = cohort.session_id
    admission = admission_to_pb(cohort.admissions[1])
    device_calls = {
        "AdvertiseKeys": pb.AdvertiseKeysRequest(session_id=sid, keys=keys_to_pb(
            cohort.device(1).advertise_keys())),
        "AwaitStage": pb.AwaitStageRequest(session_id=sid, stage=2, credentials=pb.
                                           DeviceCredentials(admission=admission)),
        "SubmitShares": pb.SubmitSharesRequest(session_id=sid, b_commitment=bytes(32)),
        "SubmitMaskedVector": pb.MaskedVector(data=bytes(128)),
        "SubmitConsistency": pb.SubmitConsistencyRequest(session_id=sid, signature=bytes(64)),
        "SubmitUnmask": pb.SubmitUnmaskRequest(session_id=sid, b_shares=[
            pb.OwnerShare(owner=2, share=bytes(33))]),
    }
    control_calls = {
        "OpenRound": pb.OpenRoundRequest(config=cohort.signed.payload,
                                         signature=cohort.signed.signature),
        "CancelRound": pb.CancelRoundRequest(round_id=cohort.round_id),
        "GetOutcome": pb.GetOutcomeRequest(round_id=cohort.round_id),
    }

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            await AggregatorControl(channel, TOKEN).open_round(cohort.signed)
            calls = [(f"/fedhh.v1.SecureAggregation/{name}", m)
                     for name, m in device_calls.items()]
            calls += [(f"/fedhh.v1.AggregatorControl/{name}", m)
                      for name, m in control_calls.items()]
            for path, message in calls:
                unary = channel.unary_unary(path)  # raw bytes in and out
                for data in (_truncated(message), b"\xff\xff\xff\xff"):
                    details = await expect_status(INVALID, unary(data, metadata=MD, timeout=30))
                    _one_line(details)
                    assert "does not parse" in details
            streaming = channel.stream_unary("/fedhh.v1.SecureAggregation/SubmitMaskedInput")

            async def chunks() -> AsyncIterator[bytes]:
                yield _truncated(pb.MaskedInputChunk(data=bytes(64)))

            await expect_status(INVALID, streaming(chunks(), timeout=30))
            results = channel.unary_stream("/fedhh.v1.AggregatorControl/GetResult")
            call = results(_truncated(pb.GetResultRequest(round_id=cohort.round_id)),
                           metadata=MD, timeout=30)
            await expect_status(INVALID, call.read())
            await _released_exactly(channel, cohort, range(1, N + 1))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=120)


# -- replay, impersonation, wrong stage -------------------------------------------------------

class _Recorder:
    """A device's stub that keeps a copy of every request it sends (for replaying them)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.SecureAggregationStub(channel)
        self.sent: dict[str, list[Any]] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)

        def call(request: Any, **kwargs: Any) -> Any:
            if not hasattr(request, "SerializeToString"):  # a stream: keep its messages
                messages: list[Any] = []
                self.sent.setdefault(name, []).append(messages)

                async def copied() -> AsyncIterator[Any]:
                    async for message in request:
                        messages.append(message)
                        yield message
                return method(copied(), **kwargs)
            self.sent.setdefault(name, []).append(request)
            return method(request, **kwargs)
        return call


def test_replayed_messages_of_another_round_are_refused(tmp_path: Path) -> None:
    """Device 1's every signed call in round A, replayed into round B (same devices, same
    identity keys), is UNAUTHENTICATED: its admission is A's and its signatures name A's
    session; with B's admission pasted in, the signatures still fail. Replayed into A after
    A finished, FAILED_PRECONDITION. B then releases exactly its own devices' sum."""
    a = _cohort(b"sec/replay-a", seed=1)
    b = _cohort(b"sec/replay-b", seed=2, identity_keys=a.identity_keys)
    assert a.admissions[1].identity_key == b.admissions[1].identity_key

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(a.signed)
            await control.open_round(b.signed)
            recorder = _Recorder(channel)
            fetch = asyncio.create_task(control.result(a.round_id, 60))
            outcomes = await asyncio.gather(
                participate(recorder, a.device(1), a.reports[1],
                            identity_key=a.identity_keys[1], admission=a.admissions[1]),
                *(participate(channel, a.device(u), a.reports[u],
                              identity_key=a.identity_keys[u], admission=a.admissions[u])
                  for u in range(2, N + 1)))
            await fetch
            assert all(o.contributed for o in outcomes)
            stub = pb_grpc.SecureAggregationStub(channel)
            assert {"AdvertiseKeys", "SubmitShares", "SubmitMaskedVector",
                    "SubmitConsistency", "SubmitUnmask"} <= set(recorder.sent)
            b_admission = admission_to_pb(b.admissions[1])
            for name, requests in recorder.sent.items():
                for request in requests:
                    replay = getattr(stub, name)
                    # Into A, finished: refused as too late.
                    await expect_status(NOT_NOW, replay(request, timeout=30))
                    # Into B as it was, and with B's admission pasted in.
                    moved = type(request)()
                    moved.CopyFrom(request)
                    target = moved.header if name == "SubmitMaskedVector" else moved
                    target.session_id = b.session_id
                    _one_line(await expect_status(UNAUTHENTICATED, replay(moved, timeout=30)))
                    if name == "AdvertiseKeys":
                        moved.keys.admission.CopyFrom(b_admission)
                    else:
                        target.credentials.admission.CopyFrom(b_admission)
                    _one_line(await expect_status(UNAUTHENTICATED, replay(moved, timeout=30)))
            await _released_exactly(channel, b, range(1, N + 1))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=120)


async def _header_only(stub: pb_grpc.SecureAggregationStub, header: pb.MaskedInputHeader,
                       hold: asyncio.Event) -> pb.SubmitResponse:
    """An upload that sends its header and then no data until ``hold`` is set: the answer
    must come from the header alone."""
    async def chunks() -> AsyncIterator[pb.MaskedInputChunk]:
        yield pb.MaskedInputChunk(header=header)
        await hold.wait()

    return await stub.SubmitMaskedInput(chunks(), timeout=30)


def _upload_header(cohort: Cohort, u: int, data: bytes, signer: int | None = None
                   ) -> pb.MaskedInputHeader:
    digest = hashlib.sha256(data).digest()
    key = cohort.identity_keys[signer or u]
    creds = credentials(key, cohort.admissions[u], CallKind.MASKED_INPUT, cohort.session_id,
                        header_digest(len(data), digest))
    return pb.MaskedInputHeader(session_id=cohort.session_id, credentials=creds,
                                total_bytes=len(data), vector_sha256=digest)


def test_impersonation_is_unauthenticated_before_any_work(tmp_path: Path) -> None:
    """Device 2 speaking for device 1 (its own key with 1's admission, 1's admission with 2's
    keys, a made-up id) is UNAUTHENTICATED; an upload header signed by the wrong device is
    refused from the header alone, before a slot is taken or a data byte read."""
    cohort = _cohort(b"sec/impersonation")
    sid = cohort.session_id
    stage = stage_to_pb(Stage.SHARE_KEYS)

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            stub = pb_grpc.SecureAggregationStub(channel)
            keys = keys_to_pb(cohort.device(1).advertise_keys())
            keys.admission.CopyFrom(admission_to_pb(cohort.admissions[2]))
            calls = [stub.AdvertiseKeys(pb.AdvertiseKeysRequest(session_id=sid, keys=keys))]
            as_one = credentials(cohort.identity_keys[2], cohort.admissions[1], CallKind.AWAIT,
                                 sid, await_digest(Stage.SHARE_KEYS))
            calls.append(stub.AwaitStage(pb.AwaitStageRequest(
                session_id=sid, credentials=as_one, stage=stage)))
            made_up = admission_to_pb(cohort.admissions[1])
            made_up.device_id = 4_294_967_295
            calls.append(stub.AwaitStage(pb.AwaitStageRequest(
                session_id=sid, stage=stage, credentials=pb.DeviceCredentials(
                    admission=made_up, signature=as_one.signature))))
            for call in calls:
                _one_line(await expect_status(UNAUTHENTICATED, call))
            hold = asyncio.Event()
            try:
                header = _upload_header(cohort, 1, bytes(128), signer=2)
                started = time.monotonic()
                _one_line(await expect_status(UNAUTHENTICATED, _header_only(stub, header, hold)))
                assert time.monotonic() - started < 60  # (the idle cut-off here is 120 s)
            finally:
                hold.set()
            await _released_exactly(channel, cohort, range(1, N + 1))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path, ["--upload-idle-ms", "120000"]) as agg:
        run(scenario(agg), timeout=300)


def test_messages_for_the_wrong_stage_are_refused_without_work(tmp_path: Path) -> None:
    """While keys are being advertised: an unmask, a consistency signature and a (correctly
    signed) upload header are FAILED_PRECONDITION, the upload from its header alone; a call
    signed for one stage and sent for another is UNAUTHENTICATED."""
    cohort = _cohort(b"sec/wrong-stage")

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            stub = pb_grpc.SecureAggregationStub(channel)
            s1 = session(channel, cohort, 1)
            from fedhh.secagg import ConsistencyResponse, UnmaskResponse

            await expect_status(NOT_NOW, s1.submit_unmask(
                UnmaskResponse(cohort.session_id, 1, ((2, bytes(33)),), ())))
            await expect_status(NOT_NOW, s1.submit_consistency(
                ConsistencyResponse(cohort.session_id, 1, bytes(64))))
            hold = asyncio.Event()
            try:
                data = bytes(cohort.config.dimension * 2)
                started = time.monotonic()
                _one_line(await expect_status(NOT_NOW, _header_only(
                    stub, _upload_header(cohort, 1, data), hold)))
                assert time.monotonic() - started < 60  # not the 120 s idle cut-off
            finally:
                hold.set()
            signed_for_masked = credentials(
                cohort.identity_keys[1], cohort.admissions[1], CallKind.AWAIT,
                cohort.session_id, await_digest(Stage.MASKED_INPUT))
            await expect_status(UNAUTHENTICATED, stub.AwaitStage(pb.AwaitStageRequest(
                session_id=cohort.session_id, credentials=signed_for_masked,
                stage=stage_to_pb(Stage.SHARE_KEYS))))
            await _released_exactly(channel, cohort, range(1, N + 1))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path, ["--upload-idle-ms", "120000"]) as agg:
        run(scenario(agg), timeout=300)


# -- resource exhaustion by one cohort member --------------------------------------------------

def test_one_device_cannot_hold_more_than_its_share_of_long_polls(tmp_path: Path) -> None:
    """Twelve concurrent long-polls from one admitted device: four are held (the service's
    per-device limit), the other eight are UNAVAILABLE at once; the round then runs."""
    cohort = _cohort(b"sec/polls")

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            s1 = session(channel, cohort, 1)

            async def poll() -> grpc.StatusCode:
                try:
                    await s1.await_request(Stage.SHARE_KEYS, 60_000)
                except grpc.aio.AioRpcError as error:
                    return error.code()
                return grpc.StatusCode.OK

            # The held polls outlast the test (60 s): before, their 3 s could end before a
            # loaded machine's last poll arrived, which a freed slot then held.
            polls = [asyncio.create_task(poll()) for _ in range(12)]
            ended: set[asyncio.Task[grpc.StatusCode]] = set()
            while len(ended) < 8:
                done, _ = await asyncio.wait(set(polls) - ended,
                                             return_when=asyncio.FIRST_COMPLETED)
                ended |= done
            assert [p.result() for p in ended] == [UNAVAILABLE] * len(ended), ended
            held = [p for p in polls if p not in ended]
            assert len(held) == 4 and not any(p.done() for p in held)
            for p in held:
                p.cancel()
            await asyncio.gather(*held, return_exceptions=True)
            await _released_exactly(channel, cohort, range(1, N + 1))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=120)


def test_a_trickling_member_holds_one_slot_and_the_round_completes(tmp_path: Path) -> None:
    """Device 1 (a cohort member with valid credentials) opens three uploads and trickles one
    byte every 0.2 s into each, with two upload slots in all; the others upload once it has
    begun. The second and third are refused at once (one upload per device); the first is cut
    off for its rate and frees its slot. The others' uploads go through and the round releases
    exactly their sum (before, the attacker held both slots until the stage's deadline and the
    round aborted with too few devices)."""
    cohort = _cohort(b"sec/trickle", dimension=1 << 14,
                     windows_ms=(20_000, 20_000, 20_000, 20_000, 20_000))

    async def scenario(agg: AggregatorProcess) -> tuple[list[grpc.StatusCode], float]:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            stub = pb_grpc.SecureAggregationStub(channel)
            attacker = cohort.device(1)
            s1 = session(channel, cohort, 1, attacker)
            trickling = asyncio.Event()
            honest = asyncio.create_task(_released_exactly(channel, cohort, range(2, N + 1),
                                                           _Gated(channel, trickling)))
            await s1.advertise(attacker.advertise_keys())
            status, request, _ = await s1.await_request(Stage.SHARE_KEYS, 20_000)
            assert status == pb.AWAIT_STATUS_READY
            await s1.submit_shares(attacker.share_keys(request))  # type: ignore[arg-type]
            status, request, _ = await s1.await_request(Stage.MASKED_INPUT, 20_000)
            assert isinstance(request, MaskedInputRequest)
            data = attacker.masked_input(request, cohort.reports[1]).vector_bytes()
            header = _upload_header(cohort, 1, data)

            async def trickle() -> grpc.StatusCode:
                async def chunks() -> AsyncIterator[pb.MaskedInputChunk]:
                    yield pb.MaskedInputChunk(header=header)
                    for i in range(len(data)):
                        await asyncio.sleep(0.2)  # the attacker's pace, not synchronisation
                        yield pb.MaskedInputChunk(data=data[i:i + 1])
                        trickling.set()  # the others upload once the attack is under way
                try:
                    await stub.SubmitMaskedInput(chunks(), timeout=60)
                except grpc.aio.AioRpcError as error:
                    return error.code()
                return grpc.StatusCode.OK

            started = time.monotonic()
            codes = await asyncio.gather(trickle(), trickle(), trickle())
            cut_after = time.monotonic() - started
            await honest
            return codes, cut_after
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path, ["--max-uploads", "2", "--upload-idle-ms", "1000",
                                      "--upload-min-rate", "16384",
                                      "--quiet-close-ms", "1500"]) as agg:
        codes, cut_after = run(scenario(agg), timeout=120)
        log = agg.log.read_text(errors="replace")
    assert codes.count(UNAVAILABLE) == 2, codes
    cut = next(c for c in codes if c != UNAVAILABLE)
    # The cut arrives while the attacker is writing its next byte; grpc.aio then reports the
    # aggregator's DEADLINE_EXCEEDED to it as INTERNAL (grpc/grpc#36066), which a busy
    # machine shows now and then. The aggregator itself must have failed nothing.
    assert cut in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL), codes
    assert "unexpected error" not in log and "Traceback" not in log
    # 32 KiB at >= 16 KiB/s after a 1 s grace: cut off after about 3 s, not at the deadline.
    assert cut_after < 15, cut_after


async def _held_upload(port: int, first: bytes) -> tuple[asyncio.StreamReader,
                                                          asyncio.StreamWriter]:
    """A Connect SubmitMaskedVector declaring a 1 MB body of which only ``first`` is sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /fedhh.v1.SecureAggregation/SubmitMaskedVector HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/proto\r\nContent-Length: 1000000\r\n\r\n" + first)
    await writer.drain()
    return reader, writer


def test_uploads_of_nobody_hold_no_turn_of_the_connect_port(tmp_path: Path) -> None:
    """The Connect port reads --max-uploads large bodies at a time. Outsiders who declare large
    masked vectors and send a byte of each held every turn (each for the body's whole time),
    so the cohort's web devices missed their masked-input stage and the round aborted (2 of 6
    rounds lost in the probe, every one for an attacker who knows the stage times). Now a
    body takes a turn only once its signed header (its first field) shows an admitted device:
    the outsiders wait without one and are cut off at their time; a header signed by another
    device is UNAUTHENTICATED and one of an unknown round NOT_FOUND, each at once and unread;
    the cohort's devices, all over the Connect port, upload and the round releases exactly
    their sum within its 10 s windows, while the outsiders' bodies still wait."""
    cohort = _cohort(b"sec/connect-turns", dimension=1 << 16, windows_ms=(10_000,) * 5)
    data = bytes(2 << 16)  # (the round's vector length, 16-bit words)

    def body_of(header: pb.MaskedInputHeader) -> bytes:
        return pb.MaskedVector(header=header, data=data).SerializeToString()

    forged = body_of(_upload_header(cohort, 1, data, signer=2))
    stranger = _upload_header(cohort, 1, data)
    stranger.session_id = b"\x07" * 32
    unknown = body_of(stranger)

    async def scenario(agg: AggregatorProcess) -> None:
        port = int(agg.ready["web_port"])
        channel = agg.channel()
        web = ConnectStub(ConnectChannel(f"127.0.0.1:{port}", insecure=True),
                          pb.DESCRIPTOR.services_by_name["SecureAggregation"])
        held = []
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            held = [await _held_upload(port, first) for first in (b"\x0a", b"\x0a\x80", b"")]
            for body, code in ((forged, b"401"), (unknown, b"404")):
                reader, writer = await _held_upload(port, body[:2000])
                async with asyncio.timeout(30):
                    status = (await reader.readline()).split()[1]
                writer.transport.abort()
                assert status == code, (status, code)
            await _released_exactly(channel, cohort, range(1, N + 1), web)
            for reader, _ in held:  # (still waiting: their time is 276 s)
                assert not reader.at_eof()
        finally:
            for _, writer in held:
                writer.transport.abort()
            await web.close()
            await channel.close()

    with AggregatorProcess(tmp_path, ["--web-listen", "127.0.0.1:0", "--max-uploads", "2",
                                      "--upload-idle-ms", "20000"]) as agg:
        run(scenario(agg), timeout=120)
        log = agg.log.read_text(errors="replace")
    assert "unexpected error" not in log and "Traceback" not in log


# Runs the CLI with an open-file limit of 256 (soft) and 512 (hard), as a container might.
LIMITED = [sys.executable, "-c", "import resource, runpy, sys; "
           "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512)); "
           "sys.argv = ['fedhh', *sys.argv[1:]]; runpy.run_module('fedhh.cli.main', "
           "run_name='__main__')"]


def test_the_framed_port_leaves_the_grpc_port_files_to_open(tmp_path: Path) -> None:
    """The framed port at 16,384 connections (its default; here asked for) under a 1,024-file
    limit: 1,100 connections that sent only the preface (each held 120 s without a stream)
    took every file, and the aggregator's own gRPC port could no longer accept. Now the
    service raises its soft limit to the hard one (256 -> 512 here) and a listener holds at
    most a quarter of it (128 here; a figure asked for above it is warned about in its log,
    the default held to it silently: tests/unit/rpc/test_listener_connection_cap.py): of 200
    such connections, the 72 over are closed on arrival, and the gRPC port still serves."""
    async def scenario(agg: AggregatorProcess) -> None:
        port = int(agg.ready["session_port"])
        held: list[asyncio.StreamWriter] = []
        ends: list[asyncio.Task[bytes]] = []  # each done once its connection is closed
        try:
            for _ in range(200):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(PREFACE)
                held.append(writer)
                ends.append(asyncio.create_task(reader.read()))
            deadline = time.monotonic() + 30
            while sum(end.done() for end in ends) < 72:
                assert time.monotonic() < deadline, sum(end.done() for end in ends)
                await asyncio.wait([end for end in ends if not end.done()], timeout=0.1)
            assert sum(end.done() for end in ends) == 72
            channel = agg.channel()
            try:
                answer = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=30)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
            finally:
                await channel.close()
        finally:
            for writer in held:
                writer.transport.abort()
            await asyncio.gather(*ends, return_exceptions=True)

    with AggregatorProcess(tmp_path, ["--session-listen", "127.0.0.1:0",
                                      "--session-max-connections", "16384"],
                           command=LIMITED) as agg:
        log = agg.log.read_text(errors="replace")
        assert "holds at most 128 connections, a quarter of the process's open-file limit " \
               "(512), not the 16384 asked for" in log, log
        run(scenario(agg), timeout=120)


# -- the control API's ids -------------------------------------------------------------------

def test_control_calls_bound_their_round_ids(tmp_path: Path) -> None:
    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            raw = pb_grpc.AggregatorControlStub(channel)
            for round_id in (b"", b"x" * 65):
                for call in (raw.GetOutcome(pb.GetOutcomeRequest(round_id=round_id),
                                            metadata=MD),
                             raw.CancelRound(pb.CancelRoundRequest(round_id=round_id),
                                             metadata=MD)):
                    details = await expect_status(INVALID, call)
                    _one_line(details)
                    assert "round_id must be 1..64 bytes" in details
                results = raw.GetResult(pb.GetResultRequest(round_id=round_id), metadata=MD)
                await expect_status(INVALID, results.read())
            bad = (("authorization", "Bearer " + "9" * 20),)
            await expect_status(UNAUTHENTICATED, raw.GetOutcome(
                pb.GetOutcomeRequest(round_id=b"r"), metadata=bad))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=60)


pytestmark = pytest.mark.slow
