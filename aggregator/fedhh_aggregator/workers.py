"""The combiner's workers: plain aggregators it drives over their control API.

A worker is named by two addresses: the one the combiner dials for control calls (inside the
cluster, e.g. a StatefulSet pod's stable DNS name) and the one devices dial for the shards it
runs (``--worker CONTROL[=PUBLIC[=WEB_URL[=SESSION]]]``; the same when devices reach it the same
way), the Connect URL browser devices use for it, if it serves one, and its framed session port,
if it serves one. The combiner
uses the same control token and CA as the coordinator does with a single aggregator.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fedhh.errors import ConfigError
from fedhh.rpc.aggregator_client import AggregatorControl, open_channel
from fedhh.rpc.aggregator_wire import CONTROL_SERVICE
from fedhh.rpc.serving import check_address, check_web_url
from fedhh.rpc.tls import TlsFiles

__all__ = ["Worker", "WorkerPool", "WorkerSpec", "parse_worker"]

HEALTH_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class WorkerSpec:
    control_address: str
    public_address: str
    web_url: str = ""
    session_address: str = ""


def parse_worker(text: str) -> WorkerSpec:
    """``CONTROL``, ``CONTROL=PUBLIC`` (each HOST:PORT), ``CONTROL=PUBLIC=WEB_URL`` (the
    worker's Connect URL, https://HOST:PORT) or ``CONTROL=PUBLIC=WEB_URL=SESSION`` (its
    framed session port, HOST:PORT; WEB_URL may then be empty)."""
    control, _, rest = text.partition("=")
    public, _, rest = rest.partition("=")
    web_url, _, session = rest.partition("=")
    public = public or control
    for address in (control, public, *([session] if session else [])):
        try:
            check_address(address, "each address of a worker")
        except ConfigError:
            raise ConfigError(f"a worker is HOST:PORT[=HOST:PORT[=https://HOST:PORT"
                              f"[=HOST:PORT]]], got {text!r}") from None
    if web_url:
        check_web_url(web_url, "a worker's Connect URL")
    return WorkerSpec(control, public, web_url, session)


class Worker:
    """One worker's channel, control client and health stub."""

    def __init__(self, index: int, spec: WorkerSpec, tls: TlsFiles | None, token: bytes) -> None:
        self.index = index
        self.spec = spec
        self.channel = open_channel(spec.control_address,
                                    tls.channel_credentials() if tls else None)
        self.control = AggregatorControl(self.channel, token)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    async def serving(self) -> bool:
        """True iff the worker's control service answers SERVING within a short timeout."""
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.TimeoutError):
            reply = await self._health.Check(
                health_pb2.HealthCheckRequest(service=CONTROL_SERVICE), timeout=HEALTH_TIMEOUT_S)
            return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
        return False


class WorkerPool:
    """The combiner's workers, by index (the order of ``--worker`` options)."""

    def __init__(self, specs: list[WorkerSpec], tls: TlsFiles | None, token: bytes) -> None:
        if not specs:
            raise ConfigError("a combiner needs at least one --worker")
        if len({s.control_address for s in specs}) != len(specs):
            raise ConfigError("each --worker must be a different aggregator")
        self.workers = [Worker(i, spec, tls, token) for i, spec in enumerate(specs)]

    def __len__(self) -> int:
        return len(self.workers)

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    async def describe(self) -> list[tuple[Worker, bool]]:
        """Every worker with whether it is serving now (checked concurrently)."""
        states = await asyncio.gather(*(w.serving() for w in self.workers))
        return list(zip(self.workers, states, strict=True))

    async def close(self) -> None:
        for worker in self.workers:
            await worker.channel.close()
