"""Shared helpers of the aggregator service tests (not a test module).

A coordinator key, a control token, cohorts with real deadlines, an in-process aggregator on
127.0.0.1:0, and an event loop runner (uvloop, like the service).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
import uvloop
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.aggregator_client import DeviceSession, open_channel
from fedhh.secagg import (
    Admission,
    IdentityTree,
    RoundConfig,
    RoundKeys,
    SecAggDevice,
    SignedConfig,
    StageDeadlines,
    issue_admission,
    session_id_of,
    sign_config,
)
from fedhh.secagg.primitives import ed25519_from_seed, ed25519_public_bytes
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.main import Aggregator, Settings, start
from fedhh_aggregator.rounds import Limits

T = TypeVar("T")

COORDINATOR_KEY = ed25519_from_seed(b"\x01" * 32)
COORDINATOR_PUBLIC = ed25519_public_bytes(COORDINATOR_KEY)
TOKEN = b"control-token-for-tests-0123456789"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a test coroutine on a fresh uvloop event loop."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(asyncio.wait_for(coro, 60))


@dataclass(frozen=True)
class Cohort:
    config: RoundConfig
    signed: SignedConfig
    identity_keys: dict[int, Ed25519PrivateKey]
    admissions: dict[int, Admission]
    reports: dict[int, np.ndarray]
    round_keys: dict[int, RoundKeys]

    @property
    def session_id(self) -> bytes:
        return session_id_of(self.config)

    @property
    def round_id(self) -> bytes:
        return self.config.round_id

    def device(self, u: int) -> SecAggDevice:
        return SecAggDevice(self.signed, COORDINATOR_PUBLIC, u,
                            identity_key=self.identity_keys[u], admission=self.admissions[u],
                            round_keys=self.round_keys[u])

    def plaintext_sum(self, devices: set[int] | list[int]) -> np.ndarray:
        total = np.zeros(self.config.dimension, np.int64)
        for u in devices:
            total[self.reports[u]] += 1
        return total


def make_cohort(n: int, dimension: int, k: int, t: int, n_min: int, *,
                windows_ms: tuple[int, int, int, int, int] = (2000,) * 5,
                modulus_bits: int = 16, consistency_check: bool = False,
                round_id: bytes = b"run/1/1", seed: int = 0,
                coordinator_key: Ed25519PrivateKey = COORDINATOR_KEY,
                device_auth: bool = True) -> Cohort:
    """Devices 1..n with identity keys, admissions and random 0/1 reports; the stage deadlines
    are now + the cumulative ``windows_ms``."""
    now = int(time.time() * 1000)
    ends, acc = [], now
    for w in windows_ms:
        acc += w
        ends.append(acc)
    rng = np.random.default_rng(seed)
    graph_seed = rng.bytes(32)
    keys = {u: ed25519_from_seed(rng.bytes(32)) for u in range(1, n + 1)}
    round_keys = {u: RoundKeys.generate(rng.bytes) for u in keys}
    tree = IdentityTree(round_id, graph_seed,
                        [(ed25519_public_bytes(keys[u]), *round_keys[u].public)
                         for u in range(1, n + 1)])
    admissions = {u: issue_admission(tree, u) for u in keys}
    config = RoundConfig(round_id=round_id, num_devices=n, dimension=dimension,
                         modulus_bits=modulus_bits, n_min=n_min, k=k, t=t,
                         graph_seed=graph_seed, deadlines=StageDeadlines(*ends),
                         device_auth=device_auth, consistency_check=consistency_check,
                         identity_root=tree.root if device_auth else None)
    reports = {u: np.flatnonzero(rng.random(dimension) < 0.3) for u in keys}
    return Cohort(config, sign_config(config, coordinator_key), keys, admissions, reports,
                  round_keys)


@asynccontextmanager
async def aggregator(limits: Limits | None = None
                     ) -> AsyncIterator[tuple[Aggregator, grpc.aio.Channel]]:
    """An aggregator on 127.0.0.1 (OS-chosen port) and a channel to it."""
    agg = await start(Settings(coordinator_public=COORDINATOR_PUBLIC, control_token=TOKEN,
                               listen="127.0.0.1:0", insecure=True,
                               limits=limits or Limits()))
    channel = open_channel(f"127.0.0.1:{agg.port}")
    try:
        yield agg, channel
    finally:
        await channel.close()
        await agg.stop(grace=0.5)


def session(channel: grpc.aio.Channel, cohort: Cohort, u: int,
            device: SecAggDevice | None = None) -> DeviceSession:
    return DeviceSession(pb_grpc.SecureAggregationStub(channel), device or cohort.device(u),
                         cohort.identity_keys[u], cohort.admissions[u])


async def expect_status(code: grpc.StatusCode, call: Awaitable[object]) -> str:
    """Await ``call``, which must fail with ``code``; returns the status details."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, (info.value.code(), info.value.details())
    return info.value.details() or ""
