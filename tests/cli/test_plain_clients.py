"""`fedhh admin` and `fedhh health` take --insecure for plaintext, as the services and devices
spell it.

Before: docs/networked.md's sequence run without TLS (`--insecure` on the aggregator, the
coordinator and the device) stopped at the operator's commands: `fedhh admin ... --insecure`
and `fedhh health ... --insecure` were "unrecognized arguments: --insecure", their plaintext
being what no --ca means. --insecure is now that, said outright, and still loopback only.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any, ClassVar

import grpc
import pytest
from cli_kit import one_line_error, run_cli
from grpc_health.v1 import health as grpc_health
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fedhh.rpc import admin_client


class Client:
    """Stands in for AdminClient: remembers how it was asked to connect."""

    made: ClassVar[list[tuple[str, str | None]]] = []

    def __init__(self, address: str, token: bytes, ca: str | None) -> None:
        Client.made.append((address, ca))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def runs(self) -> list[Any]:
        return []


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    Client.made = []
    monkeypatch.setattr(admin_client, "AdminClient", Client)
    path = tmp_path / "admin.token"
    path.write_text("0123456789abcdef0123\n")
    return str(path)


@pytest.mark.parametrize("where", ["before", "after"])
def test_admin_insecure_dials_plaintext(token: str, where: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    connection = ["--coordinator", "127.0.0.1:7000", "--insecure", "--token-file", token]
    argv = [*connection, "list"] if where == "before" else ["list", *connection]
    code, _, err = run_cli(["admin", *argv], capsys)
    assert (code, err) == (0, "")
    assert Client.made == [("127.0.0.1:7000", None)]


def test_admin_refuses_ca_with_insecure(token: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["admin", "--coordinator", "127.0.0.1:7000", "--ca",
                           str(tmp_path / "ca.pem"), "--token-file", token, "list",
                           "--insecure"], capsys)
    assert line == ("fedhh admin list: error: give --ca (TLS) or --insecure (plaintext on "
                    "loopback), not both")
    assert Client.made == []


def test_admin_insecure_stays_on_loopback(token: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["admin", "--coordinator", "10.1.2.3:7000", "--insecure",
                           "--token-file", token, "list"], capsys)
    assert line == ("fedhh admin list: error: --ca is required for a non-loopback coordinator "
                    "(10.1.2.3:7000)")
    assert Client.made == []


@pytest.fixture
def plaintext_port() -> Iterator[int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = grpc_health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


def test_health_insecure_asks_in_plaintext(plaintext_port: int,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["health", "--address", f"127.0.0.1:{plaintext_port}", "--insecure"],
                   capsys) == (0, f"127.0.0.1:{plaintext_port}: SERVING\n", "")


def test_health_refuses_ca_with_insecure(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["health", "--address", "127.0.0.1:7000", "--insecure", "--ca",
                           str(tmp_path / "ca.pem")], capsys)
    assert "argument --ca: not allowed with argument --insecure" in line


def test_health_insecure_stays_on_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["health", "--address", "10.1.2.3:7000", "--insecure"], capsys)
    assert line == "fedhh health: error: --ca is required for a non-loopback address"
