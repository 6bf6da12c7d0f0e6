"""A service the operator cannot reach, for each way a new operator gets it wrong: the CA of
another `fedhh certs`, an address the certificate does not name, an expired certificate, a
port that is not gRPC (the dashboard's, a framed one), TLS against a plaintext service, a port
nothing listens on. `fedhh health` said "UNAVAILABLE" for every one; `fedhh admin` gave gRPC's
words ("... BAD_SIGNATURE: certificate signature failure: OK") under a plain-text log line of
gRPC's C core; `fedhh device` started and retried in silence for ever. Each now names the
cause and what to do; the device refuses a mistake that waiting cannot mend before anything
is written, and says once that a coordinator it cannot reach yet is being waited for.

Every server here is local, on a port the OS chose."""

from __future__ import annotations

import datetime as dt
import os
import queue
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cli_kit import run_cli
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health as grpc_health
from grpc_health.v1 import health_pb2_grpc
from networked_kit import refused_port

import fedhh_device.main
from fedhh.rpc.tls import make_dev_pki
from fedhh.rpc.topology import READY_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[2]
FEDHH = [sys.executable, "-m", "fedhh.cli.main"]
START_BOUND_S = READY_TIMEOUT_S


def grpc_server(credentials: grpc.ServerCredentials | None) -> tuple[grpc.Server, int]:
    """A gRPC server with only the health service (SERVING), TLS unless ``credentials`` is
    None, on 127.0.0.1 at a port the OS chose."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(grpc_health.HealthServicer(), server)
    port = (server.add_secure_port("127.0.0.1:0", credentials) if credentials is not None
            else server.add_insecure_port("127.0.0.1:0"))
    server.start()
    return server, port


def server_credentials(tls: Path) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials([((tls / "server.key").read_bytes(),
                                         (tls / "server.pem").read_bytes())])


def reissue(tls: Path, names: list[str], days_left: float) -> None:
    """Replace tls/server.pem by a certificate from the same CA and key for ``names`` that
    ends in ``days_left`` days (negative: ended)."""
    ca_key = serialization.load_pem_private_key((tls / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate((tls / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((tls / "server.key").read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedhh")]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=3))
            .not_valid_after(now + dt.timedelta(days=days_left))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    (tls / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def expire(tls: Path) -> None:
    """A certificate for localhost from the same CA and key that ended a day ago."""
    reissue(tls, ["localhost"], -1)


class Pki:
    def __init__(self, root: Path) -> None:
        self.tls = root / "tls"
        make_dev_pki(self.tls, ["localhost"])  # names localhost only, not 127.0.0.1
        self.ca = self.tls / "ca.pem"
        self.other_ca = make_dev_pki(root / "other", ["localhost"]).ca  # another CA
        self.token = root / "admin.token"
        self.token.write_text("0123456789abcdef0123\n")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[int]:
    server, port = grpc_server(server_credentials(pki.tls))
    yield port
    server.stop(None)


@pytest.fixture
def https_port(pki: Pki) -> Iterator[int]:
    """A TLS port that speaks HTTP/1.1, not gRPC (as the dashboard's does): it accepts and
    completes handshakes until the test ends."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.tls / "server.pem", pki.tls / "server.key")
    context.set_alpn_protocols(["http/1.1"])
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(raw, server_side=True) as tls:
                    tls.settimeout(1)
                    tls.recv(1)
            except (OSError, ssl.SSLError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    listener.close()


def health(address: str, ca: Path | None, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_cli(["health", "--address", address,
                          *(["--ca", str(ca)] if ca else [])], capsys)
    assert code == 1 and err == "", (code, err)
    (line,) = out.splitlines()
    return line


def test_health_names_a_ca_that_did_not_sign_the_certificate(
        pki: Pki, tls_server: int, capsys: pytest.CaptureFixture[str]) -> None:
    address = f"localhost:{tls_server}"
    assert run_cli(["health", "--address", address, "--ca", str(pki.ca)], capsys)[:2] == \
        (0, f"{address}: SERVING\n")
    assert health(address, pki.other_ca, capsys) == (
        f"{address}: UNAVAILABLE (the certificate served at {address} is not signed by the CA "
        f"in {pki.other_ca}: give --ca the ca.pem of the CA that signed the services' "
        "certificates; for a stack set up with fedhh certs, the one in its --out folder, such "
        "as deploy/tls/ca.pem)")


def test_health_names_the_names_the_certificate_holds(
        pki: Pki, tls_server: int, capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{tls_server}"
    assert health(address, pki.ca, capsys) == (
        f"{address}: UNAVAILABLE (the certificate served at {address} is not valid for "
        "127.0.0.1, only for localhost: dial the service by a name it holds, or add 127.0.0.1 "
        "to it with fedhh certs --hosts ...,127.0.0.1 and restart the services that serve it)")
    # --tls-name is the name checked: the compose health checks dial 127.0.0.1 so
    assert run_cli(["health", "--address", address, "--ca", str(pki.ca), "--tls-name",
                "localhost"], capsys)[0] == 0


def test_health_names_an_expired_certificate(pki: Pki, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    expire(pki.tls)
    server, port = grpc_server(server_credentials(pki.tls))
    try:
        line = health(f"localhost:{port}", pki.ca, capsys)
    finally:
        server.stop(None)
    assert line == (f"localhost:{port}: UNAVAILABLE (the certificate served at localhost:{port} "
                    "has expired: renew it (fedhh certs again, or your PKI) and restart the "
                    "services that serve it)")


def test_health_names_a_port_that_is_not_grpc(pki: Pki, https_port: int,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    address = f"localhost:{https_port}"
    assert health(address, pki.ca, capsys) == (
        f"{address}: UNAVAILABLE ({address} speaks TLS but not gRPC, so it is another port of "
        "a service: a framed, Connect, dashboard or metrics port; give the service's gRPC "
        "port, its --listen: in the compose stack 7000 for the coordinator, 7100 for the "
        "aggregator)")


def test_health_names_tls_against_plaintext_and_a_port_nobody_listens_on(
        pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    server, port = grpc_server(None)
    try:
        assert run_cli(["health", "--address", f"127.0.0.1:{port}"], capsys)[0] == 0
        assert health(f"localhost:{port}", pki.ca, capsys) == (
            f"localhost:{port}: UNAVAILABLE (localhost:{port} does not speak TLS: a service "
            "started with --insecure, or another program; a plaintext service on loopback is "
            "dialled without --ca)")
    finally:
        server.stop(None)
    with refused_port() as free:
        assert health(f"localhost:{free}", pki.ca, capsys) == (
            f"localhost:{free}: UNAVAILABLE (nothing listens at localhost:{free}: is the "
            "service running, and is this its address and port?)")


def test_admin_explains_a_wrong_ca_and_a_service_that_is_not_the_coordinator(
        pki: Pki, tls_server: int, capsys: pytest.CaptureFixture[str]) -> None:
    address = f"localhost:{tls_server}"
    code, out, err = run_cli(["admin", "--coordinator", address, "--ca", str(pki.other_ca),
                          "--token-file", str(pki.token), "list"], capsys)
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("fedhh admin list: error: UNAVAILABLE: ")
    assert line.endswith(f"(the certificate served at {address} is not signed by the CA in "
                         f"{pki.other_ca}: give --ca the ca.pem of the CA that signed the "
                         "services' certificates; for a stack set up with fedhh certs, the one "
                         "in its --out folder, such as deploy/tls/ca.pem)")
    # a service without the admin API (here only health; in the stack, the aggregator's port)
    code, out, err = run_cli(["admin", "--coordinator", address, "--ca", str(pki.ca),
                          "--token-file", str(pki.token), "list"], capsys)
    assert (code, out) == (2, "")
    assert err == (f"fedhh admin list: error: UNIMPLEMENTED: Method not found! (the service at "
                   f"{address} does not serve this call: give the coordinator's gRPC "
                   "address, in the compose stack port 7000; 7100 is the aggregator's)\n")


def clean_env() -> dict[str, str]:
    """The test's environment without GRPC_VERBOSITY (what an operator's shell has), with
    the repository's packages importable."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    env["PYTHONPATH"] = os.pathsep.join(str(ROOT / part) for part in
                                        (".", "server", "aggregator", "device"))
    return env


def test_a_failed_handshake_leaves_no_grpc_log_line(pki: Pki, tls_server: int) -> None:
    """Before: "I1203 03:52:56.771257 3530 ssl_transport_security.cc:2563] Handshake failed
    ..." on stderr, from gRPC's C core: above the operator's one-line error, and in a
    service's log of JSON lines whenever a client without the right CA called it."""
    done = subprocess.run([*FEDHH, "health", "--address", f"localhost:{tls_server}", "--ca",
                           str(pki.other_ca)], capture_output=True, text=True, timeout=60,
                          env=clean_env(), stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert done.stderr == ""
    assert "is not signed by the CA" in done.stdout


def device_argv(tmp_path: Path, coordinator: str, ca: Path) -> list[str]:
    users = tmp_path / "users.txt"
    users.write_text("apple banana\ncherry apple\n")
    tokens = tmp_path / "device.tokens"
    tokens.write_text(f"0 {'a' * 64}\n1 {'b' * 64}\n")
    return ["device", "--coordinator", coordinator, "--ca", str(ca), "--dataset", str(users),
            "--users", "tokens", "--enrollment-tokens-file", str(tokens), "--state-dir",
            str(tmp_path / "state")]


def test_a_device_refuses_a_coordinator_it_can_never_trust(
        pki: Pki, tls_server: int, https_port: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def started(args: object, check_peers: Callable[[], None]) -> int:
        check_peers()  # (the real run reads the inputs first, then asks this)
        raise AssertionError("the device process started")  # (and would run for ever)

    monkeypatch.setattr(fedhh_device.main, "run", started)
    for coordinator, ca, why in (
            (f"localhost:{tls_server}", pki.other_ca, "is not signed by the CA in"),
            (f"127.0.0.1:{tls_server}", pki.ca, "is not valid for 127.0.0.1, only for localhost"),
            (f"localhost:{https_port}", pki.ca, "speaks TLS but not gRPC"),
            # the framed port named after a wrong gRPC address changes nothing
            (f"localhost:{https_port}=localhost:{tls_server}", pki.ca, "speaks TLS but not")):
        code, out, err = run_cli(device_argv(tmp_path, coordinator, ca), capsys)
        grpc_address = coordinator.partition("=")[0]
        assert (code, out) == (2, ""), err
        (line,) = err.splitlines()
        assert line.startswith(f"fedhh device: error: --coordinator {grpc_address}: the "
                               f"certificate served at {grpc_address} " if "certificate" in why
                               else f"fedhh device: error: --coordinator {grpc_address}: "), line
        assert why in line
        assert not (tmp_path / "state").exists()  # refused before anything was written


def test_a_device_says_once_that_it_waits_for_a_coordinator_it_cannot_reach(
        pki: Pki, tmp_path: Path) -> None:
    with refused_port() as free:
        _says_once_that_it_waits(pki, tmp_path, free)


def _says_once_that_it_waits(pki: Pki, tmp_path: Path, free: int) -> None:
    device = subprocess.Popen([*FEDHH, *device_argv(tmp_path, f"localhost:{free}", pki.ca)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**clean_env(), "FEDHH_CACHE": str(tmp_path / "cache")},
                              cwd=tmp_path, stdin=subprocess.DEVNULL)
    try:
        assert device.stderr is not None
        read: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [read.put(line) for line in device.stderr or ()],
                                  daemon=True)
        reader.start()
        # (a deadline, not a window: a process that imports numpy and grpc can take tens of
        # seconds to start on a busy machine; LocalTopology gives a service 300 s)
        deadline = time.monotonic() + START_BOUND_S
        lines: list[str] = []
        while not any("device process started" in line for line in lines):
            try:
                lines.append(read.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no start line in {START_BOUND_S:g} s: {lines}") from None
            assert device.poll() is None or not read.empty(), lines  # it must not end
        # (after the dataset's import line: the inputs are read before the health is asked)
        warning = next(line for line in lines if "cannot reach" in line)
        assert warning.startswith('{"time": ')  # a JSON log line, as the service's others
        assert '"level": "WARNING"' in warning
        assert (f'"message": "cannot reach the coordinator at localhost:{free} yet, the '
                f'devices keep trying: nothing listens at localhost:{free}: is the service '
                'running, and is this its address and port?"') in warning
        # one warning, and nothing from gRPC's C core: every line is one of the log's
        assert all(line.startswith('{"time": ') for line in lines), lines
        assert sum("cannot reach" in line for line in lines) == 1, lines
        # Stopped, it says so last (before, its last line was the start's).
        device.send_signal(signal.SIGTERM)
        device.wait(START_BOUND_S)
        reader.join(START_BOUND_S)
        rest = [read.get() for _ in range(read.qsize())]
        assert rest and '"message": "device process stopped"' in rest[-1], rest
        assert '"asked_to_stop": true' in rest[-1], rest
    finally:
        device.send_signal(signal.SIGTERM)
        try:
            device.wait(60)
        finally:
            if device.poll() is None:
                device.kill()
                device.wait()
            if device.stderr is not None:
                device.stderr.close()


def test_a_selector_refuses_a_leader_it_can_never_trust(
        pki: Pki, tls_server: int, https_port: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "lost the leader", code UNAVAILABLE, every few seconds, whatever the cause."""
    import fedhh_coordinator.selector_main

    def started(args: object, check_peers: Callable[[], None]) -> int:
        check_peers()  # (the real run checks its own inputs first, then asks this)
        raise AssertionError("the selector started")

    monkeypatch.setattr(fedhh_coordinator.selector_main, "run", started)
    for leader, why in ((f"localhost:{https_port}", f"localhost:{https_port} speaks TLS but "
                                                    "not gRPC"),
                        (f"127.0.0.1:{tls_server}", "is not valid for 127.0.0.1, only for "
                                                    "localhost")):
        code, out, err = run_cli(["selector", "--leader", leader, "--listen", "127.0.0.1:0",
                              "--tls-dir", str(pki.tls), "--db", str(tmp_path / "store"),
                              "--coordinator-key", str(tmp_path / "key.pub")], capsys)
        assert (code, out) == (2, ""), err
        (line,) = err.splitlines()
        assert line.startswith(f"fedhh selector: error: --leader {leader}: ") and why in line


def test_a_coordinator_refuses_an_aggregator_it_can_never_trust(
        pki: Pki, tls_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: it started, and each run's attempts aborted with "aggregator unreachable
    (UNAVAILABLE)" once a run was started."""
    import fedhh_coordinator.main

    def started(args: object) -> int:
        raise AssertionError("the coordinator started")

    monkeypatch.setattr(fedhh_coordinator.main, "run", started)
    wrong_ca = tmp_path / "wrong-tls"
    wrong_ca.mkdir()
    (wrong_ca / "ca.pem").write_bytes(pki.other_ca.read_bytes())
    for name in ("server.pem", "server.key"):  # (a whole TLS folder, only its CA the wrong one)
        (wrong_ca / name).write_bytes((pki.tls / name).read_bytes())
    code, out, err = run_cli(["coordinator", "--listen", "127.0.0.1:0", "--tls-dir", str(wrong_ca),
                          "--aggregator", f"localhost:{tls_server}"], capsys)
    assert (code, out) == (2, ""), err
    assert err == (f"fedhh coordinator: error: --aggregator localhost:{tls_server}: the "
                   f"certificate served at localhost:{tls_server} is not signed by the CA in "
                   f"{wrong_ca / 'ca.pem'}: --tls-dir must hold the ca.pem of the CA that "
                   "signed the services' certificates; for a stack set up with fedhh certs, the "
                   "one in its --out folder, such as deploy/tls/ca.pem\n")


def test_health_names_a_service_that_never_answers(pki: Pki,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A port whose connection is accepted (by the kernel) and never served: before, the bare
    "DEADLINE_EXCEEDED"."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts
        address = f"localhost:{silent.getsockname()[1]}"
        code, out, err = run_cli(["health", "--address", address, "--ca", str(pki.ca),
                              "--timeout", "0.5"], capsys)
    assert (code, err) == (1, "")
    assert out == (f"{address}: DEADLINE_EXCEEDED (no answer within 0.5 s: a firewall that "
                   "drops the connection, an address that does not route here, or a service "
                   "too busy to answer (--timeout))\n")


def test_the_names_read_from_an_unverified_certificate_are_escaped(
        pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    """The names come from a certificate that failed verification, so anyone on the path may
    have written them: a terminal escape among them is shown, not obeyed."""
    reissue(pki.tls, ["localhost", "\x1b[2Jevil"], 30)
    server, port = grpc_server(server_credentials(pki.tls))
    try:
        line = health(f"127.0.0.1:{port}", pki.ca, capsys)
    finally:
        server.stop(None)
    assert "\x1b" not in line
    assert "is not valid for 127.0.0.1, only for localhost, \\x1b[2Jevil: dial" in line


def test_a_services_refusal_is_shown_escaped_on_one_line(
        pki: Pki, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The details of a refusal are whatever the service (or whoever answers at the address)
    sent: a line break or a terminal escape in them is shown, not obeyed."""
    from fedhh.rpc import admin_client

    class Refusal(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.PERMISSION_DENIED

        def details(self) -> str:
            return "no\n\x1b[2Jfedhh admin: all is well"

    class Refusing:
        def __init__(self, *args: object) -> None:
            pass

        def __enter__(self) -> Refusing:
            return self

        def __exit__(self, *args: object) -> None:
            return None

        def runs(self) -> list[object]:
            raise Refusal()

    monkeypatch.setattr(admin_client, "AdminClient", Refusing)
    code, out, err = run_cli(["admin", "--coordinator", "127.0.0.1:7000", "--token-file",
                          str(pki.token), "list"], capsys)
    assert (code, out) == (2, "")
    assert err == ("fedhh admin list: error: PERMISSION_DENIED: no\\x0a\\x1b[2Jfedhh admin: all is "
                   "well\n")
