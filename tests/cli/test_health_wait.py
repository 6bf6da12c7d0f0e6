"""`fedhh health --wait SECONDS`: ask again until the service is SERVING, for scripts that
start a service and then use it.

Before: docs/networked.md's "Without containers" sequence, pasted as written, started the
coordinator in the background and ran `fedhh admin start` at once; the coordinator was not
listening yet, the start failed ("nothing listens at 127.0.0.1:7000") and `wait` then said
"unknown run 'first'". `fedhh health` answered at once too, whatever its --timeout, so a
script had nothing to wait with. A mistake that waiting cannot mend still ends it at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cli_kit import run_cli
from grpc_health.v1 import health as grpc_health
from grpc_health.v1 import health_pb2, health_pb2_grpc
from networked_kit import refused_port

from fedhh.cli import health
from fedhh.rpc.tls import make_dev_pki

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def servers() -> Iterator[list[grpc.Server]]:
    started: list[grpc.Server] = []
    yield started
    for server in started:
        server.stop(None)


def health_server(servers: list[grpc.Server], status: int, port: int = 0,
                  credentials: grpc.ServerCredentials | None = None
                  ) -> tuple[grpc_health.HealthServicer, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = grpc_health.HealthServicer()
    servicer.set("", status)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = f"127.0.0.1:{port}"
    bound = (server.add_secure_port(address, credentials) if credentials is not None
             else server.add_insecure_port(address))
    server.start()
    servers.append(server)
    return servicer, bound


def test_wait_asks_again_until_a_starting_service_listens(
        servers: list[grpc.Server], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pauses: list[float] = []

    def service_starts_meanwhile(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 2:  # two questions found nothing listening; then it starts
            health_server(servers, SERVING, port)

    monkeypatch.setattr(health, "pause", service_starts_meanwhile)
    # (held until the server listens on it: nobody else can take it meanwhile)
    with refused_port(shared=True) as port:
        code, out, err = run_cli(["health", "--address", f"127.0.0.1:{port}", "--wait", "60"],
                                 capsys)
    assert (code, out, err) == (0, f"127.0.0.1:{port}: SERVING\n", "")
    assert pauses == [health.POLL_S, health.POLL_S]


def test_wait_asks_again_while_the_service_is_not_serving(
        servers: list[grpc.Server], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    servicer, port = health_server(servers, NOT_SERVING)
    monkeypatch.setattr(health, "pause", lambda _s: servicer.set("", SERVING))
    assert run_cli(["health", "--address", f"127.0.0.1:{port}", "--wait", "60"],
                   capsys)[:2] == (0, f"127.0.0.1:{port}: SERVING\n")


def test_without_wait_it_asks_once(servers: list[grpc.Server],
                                   monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    _, port = health_server(servers, NOT_SERVING)
    monkeypatch.setattr(health, "pause", lambda _s: pytest.fail("asked twice"))
    assert run_cli(["health", "--address", f"127.0.0.1:{port}"], capsys)[:2] == \
        (1, f"127.0.0.1:{port}: NOT_SERVING\n")


def test_wait_gives_up_at_its_deadline_with_the_last_cause(
        capsys: pytest.CaptureFixture[str]) -> None:
    with refused_port() as port:
        started = time.monotonic()
        code, out, _ = run_cli(["health", "--address", f"127.0.0.1:{port}", "--wait", "1"],
                               capsys)
        elapsed = time.monotonic() - started
    assert code == 1 and out.startswith(f"127.0.0.1:{port}: UNAVAILABLE (nothing listens at ")
    assert 1 - health.POLL_S <= elapsed < 30


def test_a_mistake_waiting_cannot_mend_ends_the_wait_at_once(
        tmp_path: Path, servers: list[grpc.Server], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    tls = tmp_path / "tls"
    make_dev_pki(tls, ["localhost"])
    other = make_dev_pki(tmp_path / "other", ["localhost"]).ca
    credentials = grpc.ssl_server_credentials([((tls / "server.key").read_bytes(),
                                                (tls / "server.pem").read_bytes())])
    _, port = health_server(servers, SERVING, credentials=credentials)
    monkeypatch.setattr(health, "pause", lambda _s: pytest.fail("waited on a wrong CA"))
    code, out, _ = run_cli(["health", "--address", f"localhost:{port}", "--ca", str(other),
                            "--wait", "600"], capsys)
    assert code == 1 and "is not signed by the CA in" in out
    # And the right CA is SERVING: the refusal was the CA's, not the server's.
    assert run_cli(["health", "--address", f"localhost:{port}", "--ca", str(tls / "ca.pem"),
                    "--wait", "600"], capsys)[:2] == (0, f"localhost:{port}: SERVING\n")
