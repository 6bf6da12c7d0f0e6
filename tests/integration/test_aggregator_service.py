"""The secure-aggregation service over real gRPC on 127.0.0.1 (issue 4, section 2).

Servers are started by the tests on OS-chosen ports; nothing sleeps to synchronise: devices
long-poll, the coordinator waits on GetResult, and stages close at their deadlines or as soon as
every expected device answered.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import grpc
import numpy as np
import pytest
from aggregator_testkit import (
    COORDINATOR_KEY,
    COORDINATOR_PUBLIC,
    TOKEN,
    Cohort,
    aggregator,
    close_once_the_rest_answered,
    expect_status,
    make_cohort,
    run,
    session,
    take_part,
)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2, health_pb2_grpc
from networked_kit import STOP_GRACE_S, refused_port
from prometheus_client import REGISTRY

from fedhh.errors import AuthenticationError, ConfigError, ConflictError, NotFoundError, StateError
from fedhh.rpc.aggregator_client import (
    AggregatorBusy,
    AggregatorControl,
    RoundAborted,
    open_channel,
)
from fedhh.rpc.aggregator_wire import (
    CallKind,
    admission_to_pb,
    await_digest,
    credentials,
    header_digest,
    keys_to_pb,
    stage_to_pb,
)
from fedhh.rpc.device_client import DeviceSession, RetryPolicy, SessionResult, participate
from fedhh.rpc.device_client import ParticipationEnd as End
from fedhh.rpc.tls import make_dev_pki
from fedhh.rpc.topology import READY_TIMEOUT_S
from fedhh.secagg import (
    AdvertiseKeys,
    AggregateResult,
    EncryptedShare,
    IdentityTree,
    MaskedInput,
    MaskedInputRequest,
    ReleaseEvidence,
    SecAggDevice,
    ShareKeysRequest,
    ShareKeysResponse,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
    choose_parameters,
    issue_admission,
    verify_release,
)
from fedhh.secagg.primitives import ed25519_from_seed
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.main import AggregatorSettings, start
from fedhh_aggregator.rounds import Limits, Round
from fedhh_aggregator.servicers import ANSWER_MARGIN_S

INVALID = grpc.StatusCode.INVALID_ARGUMENT
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
NOT_FOUND = grpc.StatusCode.NOT_FOUND
LATE = grpc.StatusCode.FAILED_PRECONDITION
OTHER_KEY = ed25519_from_seed(b"\x02" * 32)


def _metric(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


async def _everyone(channel: grpc.aio.Channel, cohort: Cohort,
                    drop: dict[int, Stage] | None = None, *, stubs: list[Any] | None = None,
                    retry: RetryPolicy | None = None) -> dict[int, SessionResult]:
    """Every device of ``cohort`` through a round on ``channel`` (device u through
    ``stubs[u - 1]`` when given), ``drop[u]`` the stage device u drops out before."""
    drop = drop or {}
    ids = range(1, cohort.config.num_devices + 1)
    outcomes = await asyncio.gather(*(
        participate(stubs[u - 1] if stubs else channel, cohort.device(u), cohort.reports[u],
                    identity_key=cohort.identity_keys[u], admission=cohort.admissions[u],
                    drop_at=drop.get(u), retry=retry)
        for u in ids))
    return dict(zip(ids, outcomes, strict=True))


# -- a full round ----------------------------------------------------------------------------

def test_fifty_devices_with_dropouts_release_exactly_the_survivors_sum() -> None:
    params = choose_parameters(50, dropout=0.2, corrupt=0.05)
    # The four stages that lose a device close once the others answered, not at a deadline
    # that a loaded machine's live devices could miss (before: 1.5 s windows).
    cohort = make_cohort(50, 4096, params.k, params.t, n_min=30, windows_ms=(600_000,) * 5,
                         consistency_check=True)
    drop = {2: Stage.ADVERTISE_KEYS, 9: Stage.ADVERTISE_KEYS, 13: Stage.SHARE_KEYS,
            21: Stage.SHARE_KEYS, 30: Stage.MASKED_INPUT, 34: Stage.MASKED_INPUT,
            41: Stage.CONSISTENCY_CHECK, 47: Stage.UNMASK, 50: Stage.UNMASK}
    released_before = _metric("fedhh_aggregator_rounds_released_total")
    announced: list[ReleaseEvidence] = []

    async def on_release(evidence: ReleaseEvidence) -> None:
        announced.append(evidence)

    async def scenario() -> tuple[AggregateResult, dict[int, SessionResult]]:
        async with aggregator() as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            assert await control.open_round(cohort.signed) == cohort.session_id
            close_once_the_rest_answered(agg.registry.by_session(cohort.session_id), drop)
            fetch = asyncio.create_task(control.result(cohort.round_id, 45, on_release))
            # Odd devices upload their vector in 1000-byte chunks (9 per vector), even ones in
            # one chunk.
            odd = await asyncio.gather(*(
                participate(channel, cohort.device(u), cohort.reports[u],
                            identity_key=cohort.identity_keys[u],
                            admission=cohort.admissions[u], drop_at=drop.get(u),
                            chunk_bytes=1000 if u % 2 else 1 << 20)
                for u in range(1, 51)))
            return await fetch, dict(zip(range(1, 51), odd, strict=True))

    result, outcomes = run(scenario())
    before_masking = {u for u, s in drop.items() if s <= Stage.MASKED_INPUT}
    survivors = set(range(1, 51)) - before_masking
    assert {u for u, o in outcomes.items() if o.contributed} == survivors
    for u, outcome in outcomes.items():
        if u in drop:
            assert (outcome.outcome, outcome.reached) == (End.DROPPED, drop[u])
        else:  # after enough unmask shares the stage closes early: the last ones are late
            assert outcome.outcome in (End.COMPLETED, End.LATE), (u, outcome)
    assert result.num_contributors == len(survivors) == announced[0].num_contributors
    assert result.survivors == announced[0].survivors == tuple(sorted(survivors))
    assert np.array_equal(result.total.astype(np.int64), cohort.plaintext_sum(survivors))
    # Every survivor but the one that went silent before the consistency check signed U3.
    keys = {u: cohort.admissions[u].identity_key for u in range(1, 51)}
    assert verify_release(cohort.config, keys, announced[0]) == len(survivors) - 1
    assert _metric("fedhh_aggregator_rounds_released_total") == released_before + 1


def test_a_round_below_n_min_aborts_and_releases_nothing() -> None:
    cohort = make_cohort(8, 64, 7, 4, n_min=6, round_id=b"run/1/small")
    drop = {3: Stage.MASKED_INPUT, 5: Stage.MASKED_INPUT, 8: Stage.MASKED_INPUT}
    aborts_before = _metric("fedhh_aggregator_round_aborts_total", {"reason": "too_few_devices"})
    reported_before = _metric("fedhh_aggregator_rounds_abort_reported_total")
    announced: list[ReleaseEvidence] = []

    async def on_release(evidence: ReleaseEvidence) -> None:
        announced.append(evidence)

    async def scenario() -> dict[int, SessionResult]:
        async with aggregator() as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            # (the masked input closes once the five others sent theirs, not at a 1.5 s
            # deadline all eight had to share their keys by)
            close_once_the_rest_answered(agg.registry.by_session(cohort.session_id), drop)
            outcomes = await _everyone(channel, cohort, drop)
            with pytest.raises(RoundAborted) as aborted:
                await control.result(cohort.round_id, 30, on_release)
            assert aborted.value.reason == "too_few_devices"
            # (forgotten, and counted, once the report was handed to the transport: the client
            # may read the abort a turn of the event loop before the service's handler does so)
            await _until(lambda: len(agg.registry) == 0)
            with pytest.raises(StateError):  # the abort was reported: the round is gone
                await control.result(cohort.round_id, 0)
            return outcomes

    outcomes = run(scenario())
    assert announced == []
    for u, outcome in outcomes.items():
        if u in drop:
            assert (outcome.outcome, outcome.reached) == (End.DROPPED, Stage.MASKED_INPUT)
        else:  # it was waiting for its unmask request when the round aborted
            assert (outcome.outcome, outcome.reached) == (End.ROUND_ABORTED, Stage.UNMASK)
            assert outcome.detail == "too_few_devices"
    assert _metric("fedhh_aggregator_round_aborts_total",
                   {"reason": "too_few_devices"}) == aborts_before + 1
    assert _metric("fedhh_aggregator_rounds_abort_reported_total") == reported_before + 1


# -- load: calls shed by gRPC core ------------------------------------------------------------

def test_a_burst_beyond_grpcs_default_backlog_is_served_not_shed() -> None:
    # Every device calls at about the same moment when a stage opens. The asyncio server starts
    # one call per turn of its event loop; gRPC core queues the rest and, past its default
    # backlog (1000, all of them at 3000), sheds calls at random with a bare CANCELLED before any
    # handler runs. Started from the server's own event loop, the calls arrive much faster than
    # it starts them; with the default backlog about a quarter of them were shed.
    calls = 3000

    async def scenario() -> list[grpc.StatusCode]:
        async with aggregator() as (_, channel):
            stub = pb_grpc.SecureAggregationStub(channel)
            request = pb.AwaitStageRequest(session_id=b"\x00" * 32, wait_ms=0)

            async def one() -> grpc.StatusCode:
                try:
                    await stub.AwaitStage(request, timeout=30)
                except grpc.aio.AioRpcError as error:
                    return error.code()
                return grpc.StatusCode.OK

            return await asyncio.gather(*(one() for _ in range(calls)))

    codes = run(scenario())
    assert codes.count(NOT_FOUND) == calls, {c: codes.count(c) for c in set(codes)}


class _SheddingStub:
    """A device's stub on which every call's first attempt fails with ``code`` before any
    handler ran: CANCELLED is how gRPC core sheds a call from an overfull backlog,
    DEADLINE_EXCEEDED what a device sees of an aggregator too starved to answer in time. The
    next attempt goes through."""

    def __init__(self, channel: grpc.aio.Channel,
                 code: grpc.StatusCode = grpc.StatusCode.CANCELLED, failures: int = 1) -> None:
        self._stub = pb_grpc.SecureAggregationStub(channel)
        self.code = code
        self.failures = failures  # of every failures + 1 attempts of a method, one goes through
        self.attempts: dict[str, int] = {}

    def __getattr__(self, name: str) -> object:
        method = getattr(self._stub, name)

        def call(*args: object, **kwargs: object) -> object:
            self.attempts[name] = self.attempts.get(name, 0) + 1
            if self.attempts[name] % (self.failures + 1) == 0:
                return method(*args, **kwargs)

            async def shed() -> None:
                raise grpc.aio.AioRpcError(self.code, grpc.aio.Metadata(),
                                           grpc.aio.Metadata(), details=self.code.name)

            return shed()

        return call


StubT = TypeVar("StubT")


async def _every_device_through(cohort: Cohort, make_stub: Callable[[grpc.aio.Channel], StubT]
                                ) -> tuple[AggregateResult, dict[int, SessionResult],
                                           list[StubT]]:
    """Open ``cohort``'s round and run each of its devices through a stub of its own
    (``make_stub(channel)``), retrying without backoff; the released sum, each device's
    outcome and the stubs."""
    async with aggregator() as (_, channel):
        control = AggregatorControl(channel, TOKEN)
        await control.open_round(cohort.signed)
        stubs = [make_stub(channel) for _ in range(cohort.config.num_devices)]
        outcomes = await _everyone(channel, cohort, stubs=stubs,
                                   retry=RetryPolicy(initial_backoff_s=0.0, max_backoff_s=0.0))
        return await control.result(cohort.round_id, 30), outcomes, stubs


@pytest.mark.parametrize(("code", "failures"), [
    (grpc.StatusCode.CANCELLED, 1), (grpc.StatusCode.DEADLINE_EXCEEDED, 1),
    (grpc.StatusCode.CANCELLED, 7), (grpc.StatusCode.UNAVAILABLE, 7)])
def test_devices_retry_calls_the_server_shed_and_all_contribute(code: grpc.StatusCode,
                                                                 failures: int) -> None:
    # A shed upload used to end the device ("rejected"), so the masked-input stage waited for
    # its deadline and the device's report was missing from the sum; a shed long-poll lost the
    # device's unmask shares. Every device call is idempotent, so CANCELLED is retried, and a
    # call that timed out is made again while its stage is open (a 50,000-device load test on
    # a starved machine lost devices to one timed-out long-poll each, and half of them to five
    # shed attempts: seven failures in a row, more than the policy's 5 attempts, must not end
    # a device whose stage is still open).
    cohort = make_cohort(8, 64, 7, 4, n_min=6, windows_ms=(600_000,) * 5,
                         round_id=f"run/shed/{code.name}/{failures}".encode())

    result, outcomes, stubs = run(_every_device_through(
        cohort, lambda channel: _SheddingStub(channel, code, failures)))
    for u, outcome in outcomes.items():  # the last unmask shares may come after the close
        assert outcome.contributed and outcome.outcome in (End.COMPLETED, End.LATE), (
            u, outcome)
    for stub in stubs:
        # (AwaitStage only if a submission's wait for the next request came back PENDING)
        assert {"AdvertiseKeys", "SubmitShares", "SubmitMaskedVector",
                "SubmitUnmask"} <= set(stub.attempts), stub.attempts
    assert result.num_contributors == 8
    assert np.array_equal(result.total.astype(np.int64), cohort.plaintext_sum(set(range(1, 9))))


class _LostAnswerStub:
    """A device's stub on which the first attempt of every submission that has a next stage
    reaches the aggregator and is accepted, but its answer is lost (the device sees
    DEADLINE_EXCEEDED, as from an aggregator too starved to answer in time). The submission
    long-polls for the next request, so its answer comes once the stage has closed: the
    device's repeat then arrives late."""

    LOSE = frozenset({"AdvertiseKeys", "SubmitShares", "SubmitMaskedVector", "SubmitConsistency"})

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.SecureAggregationStub(channel)
        self.answers: dict[str, list[object]] = {}

    def __getattr__(self, name: str) -> object:
        method = getattr(self._stub, name)
        if name not in self.LOSE:
            return method

        def call(*args: object, **kwargs: object) -> object:
            async def attempt() -> object:
                seen = self.answers.setdefault(name, [])
                try:
                    response = await method(*args, **kwargs)
                except grpc.aio.AioRpcError as error:
                    seen.append(error.code())
                    raise
                seen.append(response.accepted)
                if len(seen) == 1:
                    raise grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                               grpc.aio.Metadata(), grpc.aio.Metadata(),
                                               details="the answer was lost")
                return response

            return attempt()

        return call


def test_a_device_whose_accepted_submission_lost_its_answer_stays_in_the_round() -> None:
    # On a starved machine a submission can be accepted while its answer misses the call's
    # timeout; the device's repeat then finds the stage closed (FAILED_PRECONDITION). A
    # 50,000-device load test ended two in five of its devices that way, and their
    # shards then waited for their deadlines. The repeat must not end the device: it asks for
    # its next request, which the aggregator has for it.
    cohort = make_cohort(8, 64, 7, 4, n_min=6, windows_ms=(600_000,) * 5,
                         consistency_check=True, round_id=b"run/lost-answers")

    result, outcomes, stubs = run(_every_device_through(cohort, _LostAnswerStub))
    late = grpc.StatusCode.FAILED_PRECONDITION
    for stub in stubs:  # each first attempt got in; each repeat was a duplicate or too late
        for name in _LostAnswerStub.LOSE:
            assert stub.answers[name] in ([True, False], [True, late]), (name, stub.answers)
        # (these two long-poll for the next request, which comes only after the close)
        assert stub.answers["AdvertiseKeys"][1] == stub.answers["SubmitShares"][1] == late
    for outcome in outcomes.values():
        assert outcome.contributed and outcome.outcome in (End.COMPLETED, End.LATE)
    assert result.num_contributors == 8
    assert np.array_equal(result.total.astype(np.int64), cohort.plaintext_sum(set(range(1, 9))))


# -- malformed, replayed and duplicate requests ------------------------------------------------

async def _stream(stub: pb_grpc.SecureAggregationStub, chunks: list[pb.MaskedInputChunk]
                  ) -> pb.SubmitResponse:
    async def gen() -> AsyncIterator[pb.MaskedInputChunk]:
        for chunk in chunks:
            yield chunk

    return await stub.SubmitMaskedInput(gen(), timeout=10)


def _header(cohort: Cohort, u: int, data: bytes, total: int,
            key: Ed25519PrivateKey | None = None) -> pb.MaskedInputChunk:
    """A header announcing ``total`` bytes hashing like ``data``, signed by ``key``."""
    digest = hashlib.sha256(data).digest()
    creds = credentials(key or cohort.identity_keys[u], cohort.admissions[u],
                        CallKind.MASKED_INPUT, cohort.session_id, header_digest(total, digest))
    return pb.MaskedInputChunk(header=pb.MaskedInputHeader(
        session_id=cohort.session_id, credentials=creds, total_bytes=total,
        vector_sha256=digest))


def test_malformed_replayed_and_duplicate_requests_change_nothing() -> None:
    n = 6
    cohort = make_cohort(n, 300, 5, 3, n_min=4, modulus_bits=32, windows_ms=(20_000,) * 5,
                         round_id=b"run/1/malformed")
    sid = cohort.session_id

    async def scenario() -> None:
        async with aggregator() as (_, channel):
            stub = pb_grpc.SecureAggregationStub(channel)
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            devices = {u: cohort.device(u) for u in range(1, n + 1)}
            s = {u: session(channel, cohort, u, devices[u]) for u in devices}
            adverts = {u: devices[u].advertise_keys() for u in devices}

            # Unknown round, malformed session id, stage and keys.
            keys = keys_to_pb(adverts[1])
            await expect_status(NOT_FOUND, stub.AdvertiseKeys(
                pb.AdvertiseKeysRequest(session_id=bytes(32), keys=keys)))
            await expect_status(INVALID, stub.AdvertiseKeys(
                pb.AdvertiseKeysRequest(session_id=b"short", keys=keys)))
            await expect_status(INVALID, stub.AdvertiseKeys(pb.AdvertiseKeysRequest(
                session_id=sid)))
            garbage = keys_to_pb(adverts[1])
            garbage.c_pk = b"\x07" * 5
            await expect_status(INVALID, stub.AdvertiseKeys(
                pb.AdvertiseKeysRequest(session_id=sid, keys=garbage)))
            creds = credentials(cohort.identity_keys[1], cohort.admissions[1], CallKind.AWAIT,
                                sid, await_digest(Stage.ADVERTISE_KEYS))
            await expect_status(INVALID, stub.AwaitStage(pb.AwaitStageRequest(
                session_id=sid, credentials=creds, stage=stage_to_pb(Stage.ADVERTISE_KEYS))))
            await expect_status(INVALID, stub.AwaitStage(pb.AwaitStageRequest(
                session_id=sid, credentials=creds, stage=pb.SecAggStage.Value(
                    "SECAGG_STAGE_UNSPECIFIED"))))
            # A round without the consistency check has no such stage.
            await expect_status(INVALID, s[1].await_request(Stage.CONSISTENCY_CHECK, 0))
            # Too early: shares before the keys stage closed.
            await expect_status(LATE, s[1].submit_shares(
                ShareKeysResponse(sid, 1, (), bytes(32))))
            assert await s[1].advertise(adverts[1]) is True
            assert await s[1].advertise(adverts[1]) is False  # replayed: ignored
            other = AdvertiseKeys(sid, 1, adverts[2].c_pk[::-1], adverts[2].s_pk[::-1],
                                  cohort.admissions[1])
            await expect_status(INVALID, s[1].advertise(other))  # a different second copy
            for u in range(2, n + 1):  # the last one closes the stage early
                assert await s[u].advertise(adverts[u]) is True
            with pytest.raises(TimeoutError):  # still running; wait_ms = 0 answers at once
                await control.result(cohort.round_id, 0)

            # Share keys.
            responses = {}
            for u in devices:
                status, request, _ = await s[u].await_request(Stage.SHARE_KEYS, 10_000)
                assert status == pb.AWAIT_STATUS_READY
                assert isinstance(request, ShareKeysRequest)
                responses[u] = devices[u].share_keys(request)
            r1 = responses[1]
            cut = ShareKeysResponse(sid, 1, tuple(EncryptedShare(e.src, e.dst, e.ciphertext[:-1])
                                                  for e in r1.shares), r1.b_commitment)
            await expect_status(INVALID, s[1].submit_shares(cut))
            impostor = session(channel, cohort, 1, devices[1])
            impostor.identity_key = OTHER_KEY
            await expect_status(UNAUTHENTICATED, impostor.submit_shares(r1))
            await expect_status(LATE, s[1].advertise(adverts[1]))  # stage 0 has closed
            assert await s[1].submit_shares(r1) is True
            assert await s[1].submit_shares(r1) is False
            await expect_status(INVALID, s[1].submit_shares(
                ShareKeysResponse(sid, 1, r1.shares, bytes(32))))  # a different second copy
            for u in range(2, n + 1):
                assert await s[u].submit_shares(responses[u]) is True

            # Masked input: wrong lengths in the stream, bad chunks, bad signature.
            masked = {}
            for u in devices:
                status, request, _ = await s[u].await_request(Stage.MASKED_INPUT, 10_000)
                assert status == pb.AWAIT_STATUS_READY
                assert isinstance(request, MaskedInputRequest)
                masked[u] = devices[u].masked_input(request, cohort.reports[u])
            data = masked[1].vector_bytes()
            size = len(data)
            assert size == 300 * 4
            longer, shorter = data + bytes(4), data[:-4]
            bad_streams = [
                [_header(cohort, 1, data, size - 4), pb.MaskedInputChunk(data=data)],
                [_header(cohort, 1, longer, size), pb.MaskedInputChunk(data=longer)],
                [_header(cohort, 1, shorter, size), pb.MaskedInputChunk(data=shorter)],
                [_header(cohort, 1, data, size), pb.MaskedInputChunk(data=data[:500]),
                 pb.MaskedInputChunk(data=data[500:] + b"\x00")],
                [pb.MaskedInputChunk(data=data)],
                [_header(cohort, 1, data, size), _header(cohort, 1, data, size)],
                [_header(cohort, 1, data, size), pb.MaskedInputChunk(data=b""),
                 pb.MaskedInputChunk(data=data)],
                [],
            ]
            for chunks in bad_streams:
                await expect_status(INVALID, _stream(stub, chunks))
            # The same checks on the one-message form.
            bad_vectors = [
                pb.MaskedVector(header=_header(cohort, 1, data, size - 4).header, data=data),
                pb.MaskedVector(header=_header(cohort, 1, longer, size).header, data=longer),
                pb.MaskedVector(header=_header(cohort, 1, shorter, size).header, data=shorter),
                pb.MaskedVector(header=_header(cohort, 1, b"", size).header, data=b""),
                pb.MaskedVector(data=data),
            ]
            for vector in bad_vectors:
                await expect_status(INVALID, stub.SubmitMaskedVector(vector))
            tampered = bytearray(data)
            tampered[0] ^= 1
            await expect_status(UNAUTHENTICATED, _stream(stub, [
                _header(cohort, 1, data, size), pb.MaskedInputChunk(data=bytes(tampered))]))
            await expect_status(UNAUTHENTICATED, _stream(stub, [
                _header(cohort, 1, data, size, OTHER_KEY), pb.MaskedInputChunk(data=data)]))
            await expect_status(UNAUTHENTICATED, stub.SubmitMaskedVector(pb.MaskedVector(
                header=_header(cohort, 1, data, size).header, data=bytes(tampered))))
            assert await s[1].submit_masked_input(masked[1]) is True
            assert await s[1].submit_masked_input(masked[1]) is False  # an identical replay
            changed = MaskedInput(sid, 1, masked[1].vector + np.uint32(1))
            await expect_status(INVALID, s[1].submit_masked_input(changed))
            for u in range(2, n + 1):
                assert await s[u].submit_masked_input(masked[u]) is True

            # Unmask.
            answers = {}
            for u in devices:
                status, request, _ = await s[u].await_request(Stage.UNMASK, 10_000)
                assert status == pb.AWAIT_STATUS_READY
                assert isinstance(request, UnmaskRequest)
                answers[u] = devices[u].unmask(request)
            a1 = answers[1]
            await expect_status(INVALID, s[1].submit_unmask(UnmaskResponse(
                sid, 1, tuple((o, v[:-1]) for o, v in a1.b_shares), a1.s_shares)))
            await expect_status(INVALID, s[1].submit_unmask(UnmaskResponse(
                sid, 1, a1.b_shares[1:], a1.s_shares)))  # a share missing
            assert await s[1].submit_unmask(a1) is True
            assert await s[1].submit_unmask(a1) is False
            for u in range(2, n + 1):
                # Once every secret has t shares the stage closes early: later answers are late.
                try:
                    assert await s[u].submit_unmask(answers[u]) is True
                except grpc.aio.AioRpcError as error:
                    assert error.code() == LATE, error.details()

            result = await control.result(cohort.round_id, 20)
            assert result.num_contributors == n
            assert np.array_equal(result.total.astype(np.int64),
                                  cohort.plaintext_sum(list(devices)))
            # The sum was delivered and dropped; the round cannot be fetched or joined again.
            with pytest.raises(StateError):
                await control.result(cohort.round_id, 0)
            await expect_status(LATE, s[2].submit_masked_input(masked[2]))
            with pytest.raises(ConflictError):
                await control.open_round(cohort.signed)

    run(scenario())


# -- authentication ----------------------------------------------------------------------------

def test_calls_without_valid_credentials_are_unauthenticated_and_change_nothing() -> None:
    n = 5
    cohort = make_cohort(n, 40, 4, 3, n_min=5, windows_ms=(20_000,) * 5, round_id=b"run/1/auth")
    sid = cohort.session_id
    elsewhere = make_cohort(n, 40, 4, 3, n_min=5, round_id=b"run/1/elsewhere", seed=1)
    stale = make_cohort(n, 40, 4, 3, n_min=5, round_id=b"run/1/stale")  # same keys and seed
    forged = make_cohort(n, 40, 4, 3, n_min=5, round_id=b"run/1/forged",
                         coordinator_key=OTHER_KEY)

    async def scenario() -> dict[int, SessionResult]:
        async with aggregator() as (_, channel):
            raw = pb_grpc.AggregatorControlStub(channel)
            wrong = (("authorization", "Bearer not-the-control-token-at-all"),)
            for metadata in ((), wrong, (("authorization", TOKEN.decode()),)):
                await expect_status(UNAUTHENTICATED, raw.OpenRound(pb.OpenRoundRequest(
                    config=cohort.signed.payload, signature=cohort.signed.signature),
                    metadata=metadata))
                await expect_status(UNAUTHENTICATED, raw.GetResult(
                    pb.GetResultRequest(round_id=cohort.round_id), metadata=metadata).read())
                await expect_status(UNAUTHENTICATED, raw.CancelRound(
                    pb.CancelRoundRequest(round_id=cohort.round_id), metadata=metadata))
            with pytest.raises(AuthenticationError):
                await AggregatorControl(channel, b"x" * 32).open_round(cohort.signed)
            control = AggregatorControl(channel, TOKEN)
            with pytest.raises(AuthenticationError):  # not signed by the coordinator
                await control.open_round(forged.signed)
            with pytest.raises(NotFoundError):  # so it was not opened
                await control.result(forged.round_id, 0)
            await control.open_round(cohort.signed)

            stub = pb_grpc.SecureAggregationStub(channel)
            device = cohort.device(1)
            advert = device.advertise_keys()
            no_admission = keys_to_pb(advert)
            no_admission.ClearField("admission")
            foreign = keys_to_pb(advert)  # admission for another round's session
            foreign.admission.CopyFrom(admission_to_pb(elsewhere.admissions[1]))
            replayed_proof = keys_to_pb(advert)  # the same device's proof from another round
            replayed_proof.admission.CopyFrom(admission_to_pb(stale.admissions[1]))
            borrowed = keys_to_pb(advert)  # device 2's admission on device 1's keys
            borrowed.admission.CopyFrom(admission_to_pb(cohort.admissions[2]))
            self_made = keys_to_pb(advert)  # a proof in a tree the coordinator did not sign
            made_up = IdentityTree(cohort.round_id, cohort.config.graph_seed, [
                cohort.admissions[1].keys, *(cohort.admissions[2].keys for _ in range(n - 1))])
            self_made.admission.CopyFrom(admission_to_pb(issue_admission(made_up, 1)))
            swapped = keys_to_pb(advert)  # right admission, other round keys
            swapped.c_pk = cohort.admissions[2].c_pk
            assert stale.admissions[1].identity_key == cohort.admissions[1].identity_key
            for keys in (no_admission, foreign, replayed_proof, borrowed, self_made, swapped):
                await expect_status(UNAUTHENTICATED, stub.AdvertiseKeys(
                    pb.AdvertiseKeysRequest(session_id=sid, keys=keys)))
            stage = stage_to_pb(Stage.SHARE_KEYS)
            await expect_status(UNAUTHENTICATED, stub.AwaitStage(
                pb.AwaitStageRequest(session_id=sid, stage=stage)))
            bad = credentials(OTHER_KEY, cohort.admissions[1], CallKind.AWAIT, sid,
                              await_digest(Stage.SHARE_KEYS))
            await expect_status(UNAUTHENTICATED, stub.AwaitStage(
                pb.AwaitStageRequest(session_id=sid, stage=stage, credentials=bad)))
            replayed = credentials(cohort.identity_keys[1], cohort.admissions[1],
                                   CallKind.AWAIT, sid, await_digest(Stage.MASKED_INPUT))
            await expect_status(UNAUTHENTICATED, stub.AwaitStage(  # signed for another stage
                pb.AwaitStageRequest(session_id=sid, stage=stage, credentials=replayed)))

            # Nothing above changed the round: every device still joins and it completes.
            fetch = asyncio.create_task(control.result(cohort.round_id, 30))
            outcomes = await _everyone(channel, cohort)
            result = await fetch
            assert result.num_contributors == n
            assert np.array_equal(result.total.astype(np.int64),
                                  cohort.plaintext_sum(list(range(1, n + 1))))
            return outcomes

    outcomes = run(scenario())
    assert all(o.contributed for o in outcomes.values())


# -- the control API ----------------------------------------------------------------------------

def test_open_round_validates_configs_and_limits_and_cancel_aborts() -> None:
    a = make_cohort(3, 16, 2, 2, n_min=2, windows_ms=(30_000,) * 5, round_id=b"run/a")
    a_again = make_cohort(3, 16, 2, 2, n_min=2, windows_ms=(30_000,) * 5, round_id=b"run/a",
                          seed=7)
    b = make_cohort(3, 16, 2, 2, n_min=2, windows_ms=(30_000,) * 5, round_id=b"run/b")
    c = make_cohort(3, 16, 2, 2, n_min=2, windows_ms=(30_000,) * 5, round_id=b"run/c")
    unauthenticated_devices = make_cohort(3, 16, 2, 2, n_min=2, round_id=b"run/d",
                                          device_auth=False)
    past = make_cohort(3, 16, 2, 2, n_min=2, windows_ms=(-5000, 0, 0, 0, 0),
                       round_id=b"run/e")

    async def scenario() -> dict[int, SessionResult]:
        async with aggregator(Limits(max_rounds=2)) as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            raw = pb_grpc.AggregatorControlStub(channel)
            md = (("authorization", f"Bearer {TOKEN.decode()}"),)
            junk = b"not a round config"
            await expect_status(INVALID, raw.OpenRound(pb.OpenRoundRequest(
                config=junk, signature=COORDINATOR_KEY.sign(junk)), metadata=md))
            for bad in (unauthenticated_devices, past):
                await expect_status(INVALID, raw.OpenRound(pb.OpenRoundRequest(
                    config=bad.signed.payload, signature=bad.signed.signature), metadata=md))
            first = await raw.OpenRound(pb.OpenRoundRequest(
                config=a.signed.payload, signature=a.signed.signature), metadata=md)
            again = await raw.OpenRound(pb.OpenRoundRequest(
                config=a.signed.payload, signature=a.signed.signature), metadata=md)
            assert (first.created, again.created) == (True, False)
            assert first.session_id == again.session_id == a.session_id
            with pytest.raises(ConflictError):
                await control.open_round(a_again.signed)
            await control.open_round(b.signed)
            with pytest.raises(AggregatorBusy):
                await control.open_round(c.signed)
            with pytest.raises(NotFoundError):
                await control.result(b"run/nope", 0)
            with pytest.raises(NotFoundError):
                await control.cancel(b"run/nope")

            # Cancel a running round: its devices are told, nothing is released.
            joining = asyncio.gather(*(participate(
                channel, a.device(u), a.reports[u], identity_key=a.identity_keys[u],
                admission=a.admissions[u]) for u in (1, 2)))  # device 3 never comes
            assert await control.cancel(a.round_id) == "aborted"
            outcomes = dict(zip((1, 2), await joining, strict=True))
            with pytest.raises(RoundAborted) as aborted:
                await control.result(a.round_id, 5)
            assert aborted.value.reason == "cancelled"
            # (a is forgotten once its abort was handed to the transport, which the service's
            # handler may do a turn of the event loop after the client read it; until then a
            # second open of a is the no-op of a retried one)
            await _until(lambda: len(agg.registry) == 1)
            assert await control.cancel(a.round_id) == "aborted"  # idempotent
            with pytest.raises(ConflictError):
                await control.open_round(a.signed)
            await control.open_round(c.signed)  # a's slot is free again
            return outcomes

    outcomes = run(scenario())
    assert all(o.outcome == End.ROUND_ABORTED for o in outcomes.values()), outcomes


# -- the real process ------------------------------------------------------------------------------

def _lines(stream: IO[str], sink: queue.Queue[str]) -> None:
    for line in stream:
        sink.put(line)


def _wait_for_log(lines: queue.Queue[str], message: str, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("message") == message:
            return entry


def test_the_fedhh_aggregator_process_serves_health_and_stops_on_sigterm(tmp_path: Path) -> None:
    key_file = tmp_path / "coordinator.pub"
    key_file.write_bytes(COORDINATOR_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    token_file = tmp_path / "token"
    token_file.write_bytes(TOKEN + b"\n")
    ready = tmp_path / "ready.json"
    env = {k: v for k, v in os.environ.items() if k != "FEDHH_CONTROL_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedhh.cli.main", "aggregator", "--insecure",
         "--listen", "127.0.0.1:0", "--coordinator-key", str(key_file),
         "--control-token-file", str(token_file), "--ready-file", str(ready),
         "--metrics-port", "0"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    try:
        # (deadlines, not windows: a busy machine can take tens of seconds to start a process
        # that imports numpy and grpc; LocalTopology gives a service 300 s)
        _wait_for_log(lines, "aggregator serving", READY_TIMEOUT_S)
        ports = json.loads(ready.read_text())
        with grpc.insecure_channel(f"127.0.0.1:{ports['port']}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", "fedhh.v1.SecureAggregation", "fedhh.v1.AggregatorControl"):
                answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as info:  # the control API wants the token
                pb_grpc.AggregatorControlStub(channel).CancelRound(
                    pb.CancelRoundRequest(round_id=b"x"), timeout=10)
            assert info.value.code() == UNAUTHENTICATED
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['metrics_port']}/metrics",
                                    timeout=10) as page:
            assert b"fedhh_aggregator_rounds_open" in page.read()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=STOP_GRACE_S) == 0
        _wait_for_log(lines, "aggregator stopped", 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_cli_refuses_a_missing_token(tmp_path: Path) -> None:
    key_file = tmp_path / "coordinator.pub"
    key_file.write_bytes(COORDINATOR_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    env = {k: v for k, v in os.environ.items() if k != "FEDHH_CONTROL_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "fedhh.cli.main", "aggregator", "--insecure",
         "--listen", "127.0.0.1:0", "--coordinator-key", str(key_file)],
        capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert "control token" in done.stderr.splitlines()[-1]


async def _open_with_its_deadlines_ahead(control: AggregatorControl,
                                         make: Callable[[int], Cohort]) -> Cohort:
    """The cohort ``make(window_ms)`` (whose round ends ``window_ms`` from its making), its
    round opened: at 300 ms first, a loaded machine may take longer than that to open it
    (refused: its last deadline passed), and it is made again with twice the window."""
    window_ms = 300
    while True:
        cohort = make(window_ms)
        try:
            await control.open_round(cohort.signed)
            return cohort
        except ConfigError as error:
            assert "last deadline passed" in str(error) and window_ms < 60_000, error
            window_ms *= 2


def test_an_outcome_nobody_fetches_expires() -> None:
    expired_before = _metric("fedhh_aggregator_rounds_expired_total")

    async def scenario() -> None:
        async with aggregator(Limits(result_ttl_s=0.2)) as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            cohort = await _open_with_its_deadlines_ahead(control, lambda window_ms: make_cohort(
                3, 8, 2, 2, n_min=2, windows_ms=(window_ms, 0, 0, 0, 0),
                round_id=f"run/expiring/{window_ms}".encode()))
            driver = agg.registry.by_round(cohort.round_id).driver
            assert driver is not None
            await driver  # nobody came: stage 0 aborts at its deadline, then the outcome expires
            with pytest.raises(StateError):
                await control.result(cohort.round_id, 0)
            assert await control.cancel(cohort.round_id) == "aborted"
            assert len(agg.registry) == 0

    run(scenario())
    assert _metric("fedhh_aggregator_rounds_expired_total") == expired_before + 1


def test_the_service_over_tls(tmp_path: Path) -> None:
    tls = make_dev_pki(tmp_path, ["127.0.0.1"])

    async def scenario() -> None:
        agg = await start(AggregatorSettings(coordinator_public=COORDINATOR_PUBLIC,
                                             control_token=TOKEN, listen="127.0.0.1:0", tls=tls))
        channel = open_channel(f"127.0.0.1:{agg.port}", tls.channel_credentials())
        try:
            with pytest.raises(NotFoundError):  # a full round trip through TLS
                await AggregatorControl(channel, TOKEN).cancel(b"run/none")
        finally:
            await channel.close()
            await agg.stop(grace=0.5)

    run(scenario())


def test_a_device_gives_up_after_its_retries_when_nobody_listens() -> None:
    # A device retries an unreachable aggregator past its attempts while the stage is open: a
    # 0.3 s advertisement (2 s before, the default, and backoffs doubling to past 2 s: 4-6 s).
    cohort = make_cohort(3, 8, 2, 2, n_min=2, windows_ms=(300, 0, 0, 0, 0),
                         round_id=b"run/nobody")

    async def scenario(port: int) -> SessionResult:
        channel = open_channel(f"127.0.0.1:{port}")
        try:
            return await participate(
                channel, cohort.device(1), cohort.reports[1],
                identity_key=cohort.identity_keys[1], admission=cohort.admissions[1],
                retry=RetryPolicy(attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02),
                call_timeout=5)
        finally:
            await channel.close()

    with refused_port() as port:  # a port on which nothing listens
        outcome = run(scenario(port))
    assert (outcome.reached, outcome.outcome, outcome.contributed) == (
        Stage.ADVERTISE_KEYS, End.UNAVAILABLE, False)


def test_a_submission_can_wait_for_the_next_request() -> None:
    """wait_next_ms: the submission's answer carries what AwaitStage would answer for the next
    stage (READY with the device's request once the stage closed, PENDING if it did not close
    in time); without it, nothing."""
    n = 5
    cohort = make_cohort(n, 16, 4, 3, n_min=4, windows_ms=(20_000,) * 5, round_id=b"run/next")

    async def scenario() -> None:
        async with aggregator() as (_, channel):
            await AggregatorControl(channel, TOKEN).open_round(cohort.signed)
            devices = {u: cohort.device(u) for u in range(1, n + 1)}
            s = {u: session(channel, cohort, u, devices[u]) for u in devices}
            # The stage stays open while device 5 is silent: a short wait comes back PENDING.
            assert await s[1].advertise(devices[1].advertise_keys(), 50) is True
            assert s[1].take_next() == (pb.AWAIT_STATUS_PENDING, None, "")
            assert s[1].take_next() is None  # taken once
            assert await s[2].advertise(devices[2].advertise_keys()) is True
            assert s[2].take_next() is None  # not asked for
            # The last advertisement closes the stage early: the waits end with the requests.
            waits = [asyncio.create_task(s[u].advertise(devices[u].advertise_keys(), 10_000))
                     for u in (3, 4, 5)]
            assert await asyncio.gather(*waits) == [True, True, True]
            for u in (3, 4, 5):
                status, request, _ = s[u].take_next()  # type: ignore[misc]
                assert status == pb.AWAIT_STATUS_READY
                assert isinstance(request, ShareKeysRequest) and request.device_id == u
                assert request == (await s[u].await_request(Stage.SHARE_KEYS, 0))[1]

    run(scenario())


def _long_poll_cohort(round_id: bytes) -> Cohort:
    """Three devices whose stages stay open ten minutes: device 1's polls find none closed."""
    return make_cohort(3, 16, 2, 2, n_min=2, windows_ms=(600_000,) * 5, round_id=round_id)


async def _first_device(channel: grpc.aio.Channel,
                        cohort: Cohort) -> tuple[SecAggDevice, DeviceSession]:
    """Open ``cohort``'s round; device 1 and its session."""
    await AggregatorControl(channel, TOKEN).open_round(cohort.signed)
    device = cohort.device(1)
    return device, session(channel, cohort, 1, device)


def test_a_long_poll_answers_before_the_callers_deadline() -> None:
    """A long-poll ends ANSWER_MARGIN_S before the call's deadline, whatever wait the device
    asked for: a call that sat in a busy server's backlog, then waited its full wait_ms, used
    to answer after the device had given up, and the device sent its submission again."""
    cohort = _long_poll_cohort(b"run/deadline")

    async def scenario() -> None:
        async with aggregator() as (_, channel):
            device, s = await _first_device(channel, cohort)
            s.call_timeout = ANSWER_MARGIN_S + 1 - 60  # deadline: 6 s for a 60 s wait
            assert await s.advertise(device.advertise_keys(), 60_000) is True
            assert s.take_next() == (pb.AWAIT_STATUS_PENDING, None, "")
            assert await s.await_request(Stage.SHARE_KEYS, 60_000) == (
                pb.AWAIT_STATUS_PENDING, None, "")

    run(scenario())


def test_long_polls_that_run_out_leave_nothing_behind() -> None:
    """A long-poll that runs out takes its waiter with it: a device polling again and again
    with short waits while its stage stays open leaves the round holding nothing for it (the
    waiters were kept until the stage changed, so such polls grew the round's memory)."""
    cohort = _long_poll_cohort(b"run/polls")

    async def scenario() -> None:
        async with aggregator() as (agg, channel):
            device, s = await _first_device(channel, cohort)
            assert await s.advertise(device.advertise_keys()) is True
            for _ in range(20):
                assert await s.await_request(Stage.SHARE_KEYS, 5) == (
                    pb.AWAIT_STATUS_PENDING, None, "")
            waiters = agg.registry.by_session(cohort.session_id)._waiters
            assert not waiters
            # A poll whose call the device cancels takes its waiter out too.
            poll = asyncio.create_task(s.await_request(Stage.SHARE_KEYS, 60_000))
            await _until(lambda: len(waiters) == 1)
            poll.cancel()
            await _until(lambda: not waiters)

    run(scenario())


async def _until(condition: Callable[[], bool]) -> None:
    """Wait (polling the event loop, not sleeping a fixed time; ``run`` bounds the scenario)
    until ``condition`` holds."""
    while not condition():
        await asyncio.sleep(0.01)


def test_quiet_close_moves_a_round_past_a_silent_device() -> None:
    """With quiet_close_s, a stage that lost a device closes once n_min devices answered and
    then none for that long, not at its deadline (10 minutes here); the sum of the others is
    released. UNMASK still closes as soon as every secret can be rebuilt. The quiet spell is 2 s,
    not 0.3: five live devices answer each stage with n_min = 4, so a loaded machine's stall
    that long between the fourth answer and the fifth would cut the fifth."""
    n = 6
    cohort = make_cohort(n, 32, 5, 3, n_min=4, windows_ms=(600_000,) * 5,
                         round_id=b"run/quiet")
    silent = 6  # drops out before advertising its keys

    async def scenario() -> tuple[AggregateResult, float]:
        async with aggregator(Limits(quiet_close_s=2.0)) as (_, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            started = time.monotonic()
            outcomes = await take_part(channel, cohort, range(1, n))
            assert all(o.contributed for o in outcomes), outcomes
            result = await control.result(cohort.round_id, 30)
            return result, time.monotonic() - started

    result, seconds = run(scenario())
    assert seconds < 300  # the advertise stage did not wait for its deadline
    assert result.num_contributors == n - 1
    assert np.array_equal(result.total.astype(np.int64),
                          cohort.plaintext_sum(set(range(1, n)) - {silent}))


def test_quiet_close_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="quiet_close_s"):
        Limits(quiet_close_s=-1)


# -- outcomes: tombstones and the journal ------------------------------------------------------

@pytest.mark.parametrize(("change", "match"), [
    (dict(tombstone_ttl_s=10.0), "tombstone_ttl_s"),
    (dict(max_tombstones=0), "max_tombstones"),
    (dict(max_message_bytes=1000), "max_message_bytes"),
    (dict(upload_min_rate=0), "upload_min_rate"),
    (dict(max_polls_per_device=True), "max_polls_per_device"),
])
def test_limits_are_validated(change: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Limits(**change)  # type: ignore[arg-type]


def test_tombstones_and_the_journal_stay_bounded(tmp_path: Path) -> None:
    """Forty rounds opened and cancelled with room for five tombstones: the oldest are
    forgotten (UNKNOWN), the newest answer; the journal is compacted to what is kept, and a
    restart from it knows exactly the same."""
    limits = Limits(max_tombstones=5, max_rounds=2)
    cohorts = [make_cohort(3, 8, 2, 2, n_min=2, windows_ms=(30_000,) * 5,
                           round_id=f"run/bounded/{i}".encode(), seed=i) for i in range(40)]
    journal = tmp_path / "state" / "outcomes.jsonl"

    async def churn() -> list[str]:
        async with aggregator(limits, tmp_path / "state") as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            for cohort in cohorts:
                await control.open_round(cohort.signed)
                outcome = await control.outcome(cohort.round_id)
                assert (outcome.state, outcome.stage, outcome.durable) == (
                    "running", Stage.ADVERTISE_KEYS, True)
                assert await control.cancel(cohort.round_id) == "aborted"
                with pytest.raises(RoundAborted):  # delivers the abort: the round is dropped
                    await control.result(cohort.round_id, 0)
            # (dropped once the report was handed to the transport: the client may read the
            # abort a turn of the event loop before, as the service's handler runs on here)
            await _until(lambda: len(agg.registry) == 0)
            states = [(await control.outcome(c.round_id)).state for c in cohorts]
        return states

    async def reread() -> list[str]:
        async with aggregator(limits, tmp_path / "state") as (_, channel):
            control = AggregatorControl(channel, TOKEN)
            return [(await control.outcome(c.round_id)).state for c in cohorts]

    states = run(churn())
    assert states == ["unknown"] * 35 + ["aborted"] * 5
    lines = journal.read_text().splitlines()
    assert len(lines) <= 4 * (5 + 2) + 64, len(lines)  # compacted, not 120 lines
    assert run(reread()) == states
    assert len(journal.read_text().splitlines()) == 5 * 2  # open + finish of each kept round


def _record_closes(round_: Round) -> list[tuple[Stage, float, float]]:
    """(stage, Unix time, seconds of silence before it) of each stage ``round_`` closes, taken
    as its driver starts the close; the silence is since the stage's latest accepted message
    (or its opening), on the round's own clock, so that the time a loaded machine's devices
    take to answer is not counted in it."""
    closes: list[tuple[Stage, float, float]] = []
    close = round_._close

    async def recorded() -> None:
        silent = time.monotonic() - max(round_._last_accepted, round_._stage_opened)
        closes.append((round_.server.stage, time.time(), silent))
        await close()

    round_._close = recorded  # type: ignore[method-assign]
    return closes


def test_quiet_close_shortens_once_only_the_tail_is_missing() -> None:
    """With all but quiet_close_tail of the devices in, a quarter of the quiet spell closes the
    stage: one silent device of six, a 12 s spell and a tail of 20% close the advertisement
    after 3 s of silence, not 12 s."""
    n = 6
    cohort = make_cohort(n, 32, 5, 3, n_min=4, windows_ms=(600_000,) * 5, round_id=b"run/tail")

    async def scenario() -> tuple[AggregateResult, list[tuple[Stage, float, float]]]:
        async with aggregator(Limits(quiet_close_s=12, quiet_close_tail=0.2)) as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            closes = _record_closes(agg.registry.by_session(cohort.session_id))
            outcomes = await take_part(channel, cohort, range(1, n))
            assert all(o.contributed for o in outcomes), outcomes
            return await control.result(cohort.round_id, 30), closes

    result, closes = run(scenario())
    # (the silence before the close, not the round's wall time as before: on a loaded machine
    # the devices' advertisements and the later stages take seconds of their own)
    stage, _, silent = closes[0]
    assert stage == Stage.ADVERTISE_KEYS and 3 <= silent < 12, closes  # a quarter spell
    assert result.num_contributors == n - 1


@pytest.mark.parametrize(("tail", "waits_for_deadline"), [(0.05, True), (0.0, False)])
def test_quiet_close_never_cuts_a_stage_that_misses_many_devices(tail: float,
                                                                  waits_for_deadline: bool
                                                                  ) -> None:
    """Two of six devices silent (a third missing, more than four times the tail): silence
    does not close the advertisement, its 4 s deadline does; with a tail of 0 the whole quiet
    spell closes it whatever is missing, long before its 10-minute deadline.

    The deadline must pass during the test and after the four live devices advertised: a try
    in which they were not all in by half its window (a loaded machine's slow start: before,
    the round then aborted with too few devices), which cannot tell a quiet close from the
    deadline's, is made again with twice the window."""
    n, live = 6, 4
    limits = Limits(quiet_close_s=0.3, quiet_close_tail=tail)

    async def attempt(advertise_ms: int) -> tuple[tuple[Stage, float, float], float] | None:
        cohort = make_cohort(n, 32, 5, 3, n_min=live,
                             windows_ms=(advertise_ms, 600_000, 600_000, 600_000, 600_000),
                             round_id=f"run/many-missing/{tail}/{advertise_ms}".encode())
        deadline_s = cohort.config.deadlines.at_s(Stage.ADVERTISE_KEYS)
        async with aggregator(limits) as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            round_ = agg.registry.by_session(cohort.session_id)
            closes = _record_closes(round_)
            devices = asyncio.ensure_future(take_part(channel, cohort, range(1, live + 1)))
            advertising = lambda: (  # noqa: E731
                round_.server.stage == Stage.ADVERTISE_KEYS and not round_.finished.is_set())
            await _until(lambda: not advertising() or round_.server.received() == live)
            telling = advertising() and time.time() < deadline_s - advertise_ms / 2000
            outcomes = await devices
            if not telling:
                return None
            assert all(o.contributed for o in outcomes), outcomes
            result = await control.result(cohort.round_id, 30)
            assert result.num_contributors == live
            return closes[0], deadline_s

    advertise_ms = 4000 if waits_for_deadline else 600_000
    while (tried := run(attempt(advertise_ms), timeout=advertise_ms / 1000 + 60)) is None:
        assert advertise_ms < 64_000, "the live devices were never all in by half the window"
        advertise_ms *= 2
    (stage, closed, silent), deadline_s = tried
    assert stage == Stage.ADVERTISE_KEYS
    if waits_for_deadline:
        # (taken after the driver saw the deadline pass: no margin for a late close)
        assert closed >= deadline_s, (deadline_s - closed, silent)
    else:
        assert silent >= 0.3 and closed < deadline_s, (deadline_s - closed, silent)
