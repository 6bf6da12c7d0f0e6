"""A selector whose start fails after its first parts started closes every part that started,
in order, before the error reaches the caller: a port taken between ``check_startup`` and the
bind (another process's), a verifier that fails. Before, the leader link, the metrics endpoint
and the device ports started before the ``try`` and were left to the process's exit: the link
task still pending, the metrics port still listening, the store still open."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from fedhh.cli.main import build_parser
from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh_coordinator import selector_main
from fedhh_coordinator.selector import LeaderRefused
from fedhh_coordinator.store import Store


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the selector's start opened: its gRPC port, its metrics endpoint, and whether the
    store was closed."""
    seen: dict[str, Any] = {"store_closed": 0}
    bind, start_metrics, close = serving.bind, selector_main.start_metrics, Store.close

    def bound(*args: Any, **kwargs: Any) -> int:
        seen["port"] = bind(*args, **kwargs)
        return seen["port"]

    async def metrics(*args: Any, **kwargs: Any) -> Any:
        seen["metrics"] = await start_metrics(*args, **kwargs)
        return seen["metrics"]

    def closed(store: Store) -> None:
        seen["store_closed"] += 1
        close(store)

    monkeypatch.setattr(serving, "bind", bound)
    monkeypatch.setattr(selector_main, "start_metrics", metrics)
    monkeypatch.setattr(Store, "close", closed)
    monkeypatch.setenv("FEDHH_SELECTOR_TOKEN", "s" * 32)
    return seen


def _args(tmp_path: Path, leader: int, *extra: str) -> Any:
    key = tmp_path / "coordinator.pub"
    key.write_bytes(ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    Store(tmp_path / "s.sqlite").db.close()  # (the coordinator's, which a selector reads)
    return build_parser("selector").parse_args([
        "selector", "--insecure", "--listen", "127.0.0.1:0", "--metrics-port", "0",
        "--leader", f"127.0.0.1:{leader}", "--db", str(tmp_path / "s.sqlite"),
        "--coordinator-key", str(key), *extra])


@pytest.mark.parametrize("taken", ["--web-listen", "--session-listen", "--listen"])
def test_a_port_taken_since_the_check_closes_what_had_started(
        taken: str, tmp_path: Path, started: dict[str, Any]) -> None:
    with socket.socket() as leader, socket.socket() as other:
        leader.bind(("127.0.0.1", 0))  # (bound, not listening: the link's dials are refused)
        other.bind(("127.0.0.1", 0))
        other.listen()
        args = _args(tmp_path, leader.getsockname()[1],
                     taken, f"127.0.0.1:{other.getsockname()[1]}")

        async def main() -> list[str]:
            with pytest.raises(Exception, match=str(other.getsockname()[1])):
                await selector_main.serve(args)
            return [task.get_name() for task in asyncio.all_tasks()]

        assert "leader link" not in asyncio.run(main())  # (ended, not left pending)
    assert _refused(started["metrics"].port) and started["store_closed"] == 1
    # (the gRPC port is bound last, once the rest has started: a gRPC server listens from its
    # bind, and stopping one that never started leaves its port listening)
    assert "port" not in started


def test_a_verifier_that_fails_closes_the_store(tmp_path: Path, started: dict[str, Any],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any) -> None:
        raise RuntimeError("the verifier's factory failed")

    monkeypatch.setattr(selector_main, "load_verifier", broken)
    with pytest.raises(RuntimeError, match="the verifier's factory failed"):
        asyncio.run(selector_main.serve(_args(tmp_path, 9)))
    assert started["store_closed"] == 1 and "port" not in started


def test_a_selector_on_port_0_without_a_name_is_named_by_its_bound_port(
        tmp_path: Path, started: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # (before, by its --listen text: every such selector was "127.0.0.1:0" at the leader)
    names: list[str] = []

    class Link(selector_main.LeaderLink):
        async def serve(self) -> None:
            names.append(self.name)
            raise LeaderRefused(grpc.StatusCode.INVALID_ARGUMENT, "seen")

    monkeypatch.setattr(selector_main, "LeaderLink", Link)
    with pytest.raises(ConfigError, match="refused this selector"):
        asyncio.run(selector_main.serve(_args(tmp_path, 9)))
    assert started["port"] > 0 and names == [f"127.0.0.1:{started['port']}"]
    given = _args(tmp_path, 9, "--name", "east-1")
    assert selector_main.selector_name(given, started["port"]) == "east-1"


@pytest.mark.parametrize("listen", ["0.0.0.0:7000", "[::]:7000"])
def test_a_selector_on_every_address_is_named_by_its_host(listen: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Compose's and Kubernetes' replicas listen on 0.0.0.0: each was "0.0.0.0:7000" at the
    leader, whose lines on a selector attached, detached or late acknowledging named none of
    them. Now each is its host's name (its container's, its pod's), with the port."""
    monkeypatch.setattr(socket, "gethostname", lambda: "5faf56bf7191")
    args = _args(tmp_path, 9)
    args.listen = listen
    assert selector_main.selector_name(args, 7000) == "5faf56bf7191:7000"
    args.listen = "10.0.0.5:7000"  # (an address of its own names it, as before)
    assert selector_main.selector_name(args, 7000) == "10.0.0.5:7000"
