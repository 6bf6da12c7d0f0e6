"""The aggregator's and the combiner's parts are closed by one piece
(``fedhh_aggregator.service.RunningService.stop``), in one order, whichever way the service
ends: a stop asked for in process, the signal's stop, a start that fails once its first parts
started. Before, the in-process stop closed the registry (its journal) first and the signal's
last, and a failed start closed nothing: a port taken since the start's check left the
aggregator's gRPC port listening, its Connect port open and its journal's lock held, so that
the next start on that state directory waited for the lock."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.framed.server import FramedServer
from fedhh_aggregator.combiner_main import CombinerSettings
from fedhh_aggregator.combiner_main import start as start_combiner
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.main import AggregatorSettings
from fedhh_aggregator.main import start as start_aggregator
from fedhh_aggregator.service import RunningService, serve_until_signalled
from fedhh_aggregator.workers import WorkerPool, parse_worker

PUBLIC = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
    serialization.Encoding.Raw, serialization.PublicFormat.Raw)
TOKEN = b"c" * 32


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What a start opened: the gRPC port bound, the side ports started, the journals made
    and closed, the worker pools closed."""
    seen: dict[str, Any] = {"ports": [], "journals": 0, "journals_closed": 0, "pools_closed": 0}
    bind, journal_init, journal_close = serving.bind, Journal.__init__, Journal.close
    connect_start, framed_start, pool_close = (ConnectServer.start, FramedServer.start,
                                               WorkerPool.close)

    def bound(*args: Any, **kwargs: Any) -> int:
        port = bind(*args, **kwargs)
        seen["ports"].append(port)
        return port

    def made(self: Journal, *args: Any, **kwargs: Any) -> None:
        journal_init(self, *args, **kwargs)
        seen["journals"] += 1

    def closed(self: Journal) -> None:
        seen["journals_closed"] += 1
        journal_close(self)

    async def connect_started(self: ConnectServer, *args: Any, **kwargs: Any) -> int:
        seen["ports"].append(await connect_start(self, *args, **kwargs))
        return int(seen["ports"][-1])

    async def framed_started(self: FramedServer, *args: Any, **kwargs: Any) -> int:
        seen["ports"].append(await framed_start(self, *args, **kwargs))
        return int(seen["ports"][-1])

    async def pool_closed(self: WorkerPool) -> None:
        seen["pools_closed"] += 1
        await pool_close(self)

    monkeypatch.setattr(serving, "bind", bound)
    monkeypatch.setattr(Journal, "__init__", made)
    monkeypatch.setattr(Journal, "close", closed)
    monkeypatch.setattr(ConnectServer, "start", connect_started)
    monkeypatch.setattr(FramedServer, "start", framed_started)
    monkeypatch.setattr(WorkerPool, "close", pool_closed)
    return seen


@pytest.mark.parametrize("taken", ["web_listen", "session_listen", "listen"])
def test_an_aggregator_whose_port_was_taken_closes_what_had_started(
        taken: str, tmp_path: Path, opened: dict[str, Any]) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        address = f"127.0.0.1:{other.getsockname()[1]}"
        addresses: dict[str, Any] = {"listen": "127.0.0.1:0", "web_listen": "127.0.0.1:0",
                                     "session_listen": "127.0.0.1:0", taken: address}
        settings = AggregatorSettings(coordinator_public=PUBLIC, control_token=TOKEN,
                                      insecure=True, state_dir=tmp_path, **addresses)

        async def main() -> list[bool]:
            with pytest.raises(ConfigError, match=address):
                await start_aggregator(settings)
            return [_refused(port) for port in opened["ports"]]  # (the loop still running)

        assert all(asyncio.run(main()))
    assert opened["journals"] == opened["journals_closed"]
    # (each port that started before the one taken: the Connect port before the framed one,
    # the gRPC port bound last)
    assert len(opened["ports"]) == {"web_listen": 0, "session_listen": 1, "listen": 2}[taken]


def test_a_combiner_whose_port_was_taken_closes_its_journal_and_channels(
        tmp_path: Path, opened: dict[str, Any]) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        address = f"127.0.0.1:{other.getsockname()[1]}"
        settings = CombinerSettings(coordinator_public=PUBLIC, control_token=TOKEN,
                                    workers=[parse_worker("127.0.0.1:9")], listen=address,
                                    insecure=True, state_dir=tmp_path)

        async def main() -> None:
            with pytest.raises(ConfigError, match=address):
                await start_combiner(settings)

        asyncio.run(main())
    assert opened["journals"] == opened["journals_closed"] == 1
    assert opened["pools_closed"] == 1


class _Part:
    """A stand-in for each part of a running service, writing down when it was closed."""

    def __init__(self, name: str, order: list[str]) -> None:
        self.name, self.order, self.port = name, order, None

    async def stop(self, grace: float | None) -> None:
        self.order.append(self.name)

    def close(self) -> Any:
        self.order.append(self.name)
        if self.name in ("web", "sessions"):
            return asyncio.sleep(0)
        return None

    async def release(self) -> None:
        self.order.append("release")


class _Settings:
    listen = "127.0.0.1:0"
    tls = None
    insecure = True
    metrics_port = None
    metrics_host = "127.0.0.1"
    grace_s = 0.0

    def __init__(self, ready_file: Path) -> None:
        self.ready_file = ready_file


def test_every_stop_closes_the_parts_in_one_order(tmp_path: Path) -> None:
    # The server first (its calls in flight drain with the registry and its journal still
    # open), then the side ports, the registry, what the service releases.
    def running(order: list[str]) -> RunningService[Any]:
        part: dict[str, Any] = {name: _Part(name, order)
                                for name in ("server", "registry", "web", "sessions")}
        return RunningService(part["server"], part["registry"], 0, release=part["web"].release,
                              web=part["web"], sessions=part["sessions"])

    asked: list[str] = []
    asyncio.run(running(asked).stop(0.5))
    signalled: list[str] = []  # (its failure before the signal: the ready file's folder gone)

    async def serve() -> None:
        with pytest.raises(FileNotFoundError):
            await serve_until_signalled(running(signalled), "aggregator",
                                        _Settings(tmp_path / "gone" / "x.ready"))

    asyncio.run(serve())
    assert asked == signalled == ["server", "web", "sessions", "registry", "release"]
