"""Every call of an aggregator's gRPC port, Decline included, with seeded random messages: each
field at an edge (ids 0, n, n + 1, 2^31, 2^32 - 1; bytes of 0, 1, 31, 32, 33, 64, 65, 102 and
1,000 bytes; enum values no stage has; repeated fields of 0 to 3,000 entries), the round's
session id and a member's real admission in about half of them, a fifth sent as damaged bytes
(a flipped bit, cut short, a field whose length runs past the end). Control calls go with
and without the control token. Each is answered with a status that names the caller's fault
(never INTERNAL or UNKNOWN), nothing is logged at ERROR, the open round takes none of them
(no member advertised or declined), and then its members take part and it releases exactly
their sum. The aggregator serves in process, on a port of the OS's choice."""

from __future__ import annotations

import gc
import logging
import random
from typing import Any

import grpc
import numpy as np
import pytest
from aggregator_testkit import TOKEN, aggregator, make_cohort, run, take_part
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.aggregator_wire import admission_to_pb
from fedhh.v1 import aggregator_pb2 as pb

N = 6
CALLS_EACH = 25
SERVICES = (pb.DESCRIPTOR.services_by_name["SecureAggregation"],
            pb.DESCRIPTOR.services_by_name["AggregatorControl"])
TOKEN_MD = (("authorization", f"Bearer {TOKEN.decode()}"),)
# The caller's fault, or no fault (an outcome asked of a round it names, say).
ANSWERS = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT,
           grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.NOT_FOUND,
           grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED,
           grpc.StatusCode.ALREADY_EXISTS}
IDS = (0, 1, N, N + 1, 2**31, 2**32 - 1)
LENGTHS = (0, 1, 31, 32, 33, 64, 65, 102, 1000)
COUNTS = (0, 1, 2, 50, 3000)


def _value(rng: random.Random, field: FieldDescriptor) -> Any:
    kind = field.type
    if kind == FieldDescriptor.TYPE_BYTES:
        return rng.randbytes(rng.choice(LENGTHS))
    if kind == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if kind == FieldDescriptor.TYPE_ENUM:
        return rng.choice([v.number for v in field.enum_type.values] + [99, 2**31 - 1])
    if kind == FieldDescriptor.TYPE_STRING:
        return rng.choice(["", "x", "é" * 300])
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return rng.choice([*IDS, 2**64 - 1])
    return rng.choice(IDS)  # (uint32: every number field of these requests)


def _fill(rng: random.Random, message: Message, depth: int = 0) -> Message:
    descriptor: Descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        if rng.random() < 0.3:
            continue
        target = getattr(message, field.name)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth >= 3:
                continue
            if field.is_repeated:
                for _ in range(rng.choice(COUNTS[:4])):
                    _fill(rng, target.add(), depth + 1)
            else:
                _fill(rng, target, depth + 1)
                target.SetInParent()
        elif field.is_repeated:
            target.extend(_value(rng, field) for _ in range(rng.choice(COUNTS)))
        else:
            setattr(message, field.name, _value(rng, field))
    return message


def _damaged(rng: random.Random, data: bytes) -> bytes:
    change = rng.randrange(3)
    if change == 0 and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if change == 1 and data:
        return data[:rng.randrange(len(data))]
    return data + b"\x7a\xff\xff\xff\x0f"  # (field 15, length-delimited, 4 GiB long)


def _raw(data: bytes) -> bytes:
    return data


@pytest.mark.parametrize("seed", [0, 1])
def test_random_calls_are_refused_by_name_and_the_round_goes_on(
        seed: int, caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(seed)
    cohort = make_cohort(N, 32, 5, 3, n_min=4, windows_ms=(600_000,) * 5,
                         round_id=b"run/fuzzed/%d" % seed)
    admissions = [admission_to_pb(cohort.admissions[u]) for u in range(1, N + 1)]

    async def scenario() -> list[tuple[str, grpc.StatusCode, str]]:
        answers = []
        async with aggregator() as (agg, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            round_ = agg.registry.by_session(cohort.session_id)
            for service in SERVICES:
                for method in service.methods:
                    path = f"/{service.full_name}/{method.name}"
                    for _ in range(CALLS_EACH):
                        message = _fill(rng, getattr(pb, method.input_type.name)())
                        fields = message.DESCRIPTOR.fields_by_name
                        if "session_id" in fields and rng.random() < 0.5:
                            message.session_id = cohort.session_id
                        if "credentials" in fields and rng.random() < 0.5:
                            message.credentials.admission.CopyFrom(rng.choice(admissions))
                        data = message.SerializeToString()
                        if rng.random() < 0.2:
                            data = _damaged(rng, data)
                        metadata = TOKEN_MD if service is SERVICES[1] and rng.random() < 0.7 \
                            else None
                        answers.append((path, *await _call(channel, method, path, data,
                                                           metadata)))
            # Nothing of it reached the round: every member may still advertise.
            assert round_.server.received() == 0
            assert round_.server.expected_count() == N
            assert (await control.outcome(cohort.round_id)).declined == 0
            outcomes = await take_part(channel, cohort, range(1, N + 1))
            result = await control.result(cohort.round_id, 60)
            assert all(o.contributed for o in outcomes), outcomes
            assert np.array_equal(result.total.astype(np.int64),
                                  cohort.plaintext_sum(range(1, N + 1)))
        return answers

    # Another test's garbage is finalised first: an aiohttp session it left unclosed is
    # reported at ERROR by asyncio when collected, which under load fell inside this capture
    # (ci-under-load, 2026-12-06: 'Unclosed client session'), none of these services' doing.
    gc.collect()
    with caplog.at_level(logging.WARNING):
        answers = run(scenario(), timeout=120)
    odd = [(path, code, details) for path, code, details in answers if code not in ANSWERS]
    assert not odd, odd[:5]
    assert len({path for path, _, _ in answers}) == sum(len(s.methods) for s in SERVICES)
    # (asyncio's "Unclosed client session/connector" at ERROR is an aiohttp client the GC
    # finalised, none of this port's answers; it fell inside the capture under load twice,
    # gc.collect() first notwithstanding: left out, not the errors this test looks for)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR
              and not (r.name == "asyncio" and r.getMessage().startswith("Unclosed"))]
    assert not errors, [r.getMessage() for r in errors][:5]


async def _call(channel: grpc.aio.Channel, method: Any, path: str, data: bytes,
                metadata: Any) -> tuple[grpc.StatusCode, str]:
    """One call of ``data`` as its request (streaming methods: their only message); its
    status and details."""
    try:
        if method.client_streaming:
            async def one() -> Any:
                yield data
            if method.server_streaming:
                call: Any = channel.stream_stream(path, _raw, _raw)(one(), metadata=metadata,
                                                                     timeout=30)
                async for _ in call:
                    pass
            else:
                await channel.stream_unary(path, _raw, _raw)(one(), metadata=metadata,
                                                             timeout=30)
        elif method.server_streaming:
            async for _ in channel.unary_stream(path, _raw, _raw)(data, metadata=metadata,
                                                                  timeout=30):
                pass
        else:
            await channel.unary_unary(path, _raw, _raw)(data, metadata=metadata, timeout=30)
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""
