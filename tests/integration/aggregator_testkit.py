"""Shared helpers of the aggregator service tests (not a test module).

A coordinator key, a control token, cohorts with real deadlines, an in-process aggregator on
127.0.0.1:0, a real ``fedhh aggregator`` process (:class:`AggregatorProcess`), and an event loop
runner (uvloop, like the service).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
import uvloop
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from networked_kit import STOP_GRACE_S

from fedhh.rpc.control_client import open_channel
from fedhh.rpc.device_client import DeviceSession, SessionResult, participate
from fedhh.rpc.framed.client import FramedChannel, FramedStub
from fedhh.rpc.topology import READY_TIMEOUT_S
from fedhh.secagg import (
    Admission,
    IdentityTree,
    RoundConfig,
    RoundKeys,
    SecAggDevice,
    SignedConfig,
    Stage,
    StageDeadlines,
    issue_admission,
    session_id_of,
    sign_config,
)
from fedhh.secagg.primitives import ed25519_from_seed, ed25519_public_bytes
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.main import AggregatorSettings, RunningAggregator, start
from fedhh_aggregator.rounds import Limits, Round

T = TypeVar("T")

COORDINATOR_KEY = ed25519_from_seed(b"\x01" * 32)
COORDINATOR_PUBLIC = ed25519_public_bytes(COORDINATOR_KEY)
TOKEN = b"control-token-for-tests-0123456789"


def run(coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run a test coroutine on a fresh uvloop event loop (failing after ``timeout`` s)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(asyncio.wait_for(coro, timeout))


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
                windows_ms: tuple[int, int, int, int, int] = (600_000,) * 5,
                modulus_bits: int = 16, consistency_check: bool = False,
                round_id: bytes = b"run/1/1", seed: int = 0,
                coordinator_key: Ed25519PrivateKey = COORDINATOR_KEY,
                device_auth: bool = True,
                identity_keys: dict[int, Ed25519PrivateKey] | None = None) -> Cohort:
    """Devices 1..n with identity keys (``identity_keys``, or drawn from ``seed``), fresh round
    keys, admissions and random 0/1 reports; the stage deadlines are now + the cumulative
    ``windows_ms`` (by default far enough ahead that no deadline passes during a test on a
    loaded machine: a test that needs one to pass says how soon)."""
    now = int(time.time() * 1000)
    ends, acc = [], now
    for w in windows_ms:
        acc += w
        ends.append(acc)
    rng = np.random.default_rng(seed)
    graph_seed = rng.bytes(32)
    keys = {u: ed25519_from_seed(rng.bytes(32)) for u in range(1, n + 1)}
    if identity_keys is not None:
        keys = dict(identity_keys)
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
async def aggregator(limits: Limits | None = None, state_dir: Path | None = None
                     ) -> AsyncIterator[tuple[RunningAggregator, grpc.aio.Channel]]:
    """An aggregator on 127.0.0.1 (OS-chosen ports: gRPC's and the framed session port's) and
    a channel to it."""
    agg = await start(AggregatorSettings(coordinator_public=COORDINATOR_PUBLIC, control_token=TOKEN,
                               listen="127.0.0.1:0", insecure=True,
                               limits=limits or Limits(), state_dir=state_dir,
                               session_listen="127.0.0.1:0"))
    channel = open_channel(f"127.0.0.1:{agg.port}")
    try:
        yield agg, channel
    finally:
        await channel.close()
        await agg.stop(grace=0.5)


def close_once_the_rest_answered(round_: Round, drop: Mapping[int, Stage]) -> None:
    """Let ``round_`` close each stage but UNMASK (which closes once every secret can be
    rebuilt) as soon as every device it waits for answered, except those ``drop`` has drop out
    before that stage, rather than at the stage's deadline. A test whose dropouts are its own
    so waits on the answers, not on a window a loaded machine overruns (its live devices late
    for a stage that closed on time); the config's deadlines then only bound a stuck round.
    Call it before any device sends."""
    server = round_.server
    own = server.can_close_early
    silent = Counter(drop.values())

    def can_close_early() -> bool:
        if own():
            return True
        if server.aborted is not None or server.stage in (Stage.UNMASK, Stage.DONE):
            return False
        return server.received() == server.expected_count() - silent[server.stage]

    server.can_close_early = can_close_early  # type: ignore[method-assign]


TRANSPORTS = ("grpc", "framed")  # the session stream's two ports


def session_stub(agg: RunningAggregator, channel: grpc.aio.Channel, transport: str) -> Any:
    """What opens session streams to ``agg`` (``stub.Session(timeout=...)``) on ``transport``:
    gRPC's stub on ``channel``, or a stub of its framed session port."""
    if transport == "grpc":
        return pb_grpc.SecureAggregationStub(channel)
    assert transport == "framed" and agg.session_port is not None
    return FramedStub(FramedChannel(f"127.0.0.1:{agg.session_port}", None),
                      pb.DESCRIPTOR.services_by_name["SecureAggregation"], ("Session",))


def session(channel: grpc.aio.Channel, cohort: Cohort, u: int,
            device: SecAggDevice | None = None) -> DeviceSession:
    return DeviceSession(pb_grpc.SecureAggregationStub(channel), device or cohort.device(u),
                         cohort.identity_keys[u], cohort.admissions[u])


async def take_part(channel: grpc.aio.Channel, cohort: Cohort, devices: Iterable[int]
                    ) -> list[SessionResult]:
    """Each of ``devices`` of ``cohort`` through the round on ``channel``, at once, none
    dropping out."""
    return list(await asyncio.gather(*(
        participate(channel, cohort.device(u), cohort.reports[u],
                    identity_key=cohort.identity_keys[u], admission=cohort.admissions[u])
        for u in devices)))


async def expect_status(code: grpc.StatusCode, call: Awaitable[object]) -> str:
    """Await ``call``, which must fail with ``code``; returns the status details."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, (info.value.code(), info.value.details())
    return info.value.details() or ""


class AggregatorProcess:
    """A real aggregator process on 127.0.0.1 (OS-chosen port, plaintext on loopback), started
    with the test coordinator key and control token (or the given files); ``command`` replaces
    ``python -m fedhh.cli.main`` (e.g. a test's attacker service). It is killed on exit."""

    def __init__(self, workdir: Path, extra: Sequence[str] = (),
                 command: Sequence[str] | None = None, env: dict[str, str] | None = None,
                 ready_timeout_s: float = READY_TIMEOUT_S, key_file: Path | None = None,
                 token_file: Path | None = None) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        if key_file is None:
            key_file = workdir / "coordinator.pub"
            key_file.write_bytes(COORDINATOR_KEY.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        if token_file is None:
            token_file = workdir / "control.token"
            token_file.write_bytes(TOKEN)
        self.key_file, self.token_file = key_file, token_file
        self.extra = list(extra)
        self.command = list(command or [sys.executable, "-m", "fedhh.cli.main"])
        self.env = {k: v for k, v in os.environ.items() if k != "FEDHH_CONTROL_TOKEN"}
        self.env.update(env or {})
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.ready: dict[str, Any] = {}
        self.log = workdir / "aggregator.log"

    def start(self) -> AggregatorProcess:
        ready = self.workdir / "aggregator.ready.json"
        ready.unlink(missing_ok=True)
        args = [*self.command, "aggregator", "--insecure", "--listen", "127.0.0.1:0",
                "--coordinator-key", str(self.key_file),
                "--control-token-file", str(self.token_file), "--ready-file", str(ready),
                *self.extra]
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                            env=self.env)
        until = time.monotonic() + self.ready_timeout_s
        while not ready.exists():  # the child writes it once serving (atomically)
            if self.process.poll() is not None:
                raise RuntimeError(f"the aggregator exited with {self.process.returncode}:\n"
                                   + self.log.read_text(errors="replace")[-3000:])
            if time.monotonic() > until:
                raise RuntimeError(f"the aggregator was not ready in {self.ready_timeout_s} s")
            time.sleep(0.02)  # polling a file the child writes, not synchronising on time
        self.ready = json.loads(ready.read_text())  # (its ports: "port", "web_port", ...)
        self.port = int(self.ready["port"])
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self) -> grpc.aio.Channel:
        return open_channel(self.address)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> int | None:
        """SIGTERM; the exit code (SIGKILL only after a deadline: a graceful stop on a busy
        machine is waited for, not cut short)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> AggregatorProcess:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.kill()


def combiner_journal(directory: Path, round_id: bytes, shard: dict[str, Any],
                     finished: bool) -> Path:
    """A combiner's journal, ``outcomes.jsonl`` in ``directory`` (made), of one round
    (``round_id``) of one shard (``shard``: its journal entry, config, signature and worker),
    opened, and released by 4 contributors if ``finished``."""
    lines = [{"v": 1, "op": "open", "round": round_id.hex(), "session": "00" * 32,
              "at": time.time(), "detail": {"shards": [shard]}}]
    if finished:
        lines.append({"v": 1, "op": "finish", "round": round_id.hex(), "state": "released",
                      "reason": "", "reached_unmask": True, "contributors": 4,
                      "at": time.time()})
    directory.mkdir()
    path = directory / "outcomes.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
