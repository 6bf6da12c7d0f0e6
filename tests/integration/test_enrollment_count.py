"""`fedhh admin devices` (AdminService.GetEnrollment), end to end against a real coordinator on
127.0.0.1: before it, nothing told an operator how many devices had enrolled (or how many
minted tokens were still unused) short of opening the store. The count follows enrollments,
is not moved by refused ones, survives a restart over the same store, and the call wants the
admin token like every admin call."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cli_kit import one_line_error, run_cli
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.device_users import enroll_request
from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTopology]:
    root = tmp_path_factory.mktemp("probe35-enrollment")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as t:
        t.start_aggregator()
        t.start_coordinator()
        yield t


def connection(topo: LocalTopology, token_file: Path | None = None) -> list[str]:
    return ["admin", "--coordinator", topo.address("coordinator"),
            "--ca", str(topo.workdir / "tls" / "ca.pem"),
            "--token-file", str(token_file or topo.workdir / "admin.token")]


def devices(topo: LocalTopology, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = run_cli([*connection(topo), "devices"], capsys)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def enroll(topo: LocalTopology, token: str) -> grpc.StatusCode:
    key = Ed25519PrivateKey.generate()
    with grpc.secure_channel(topo.address("coordinator"),
                             ca_credentials(topo.workdir / "tls" / "ca.pem")) as channel:
        try:
            pb_grpc.DeviceServiceStub(channel).Enroll(enroll_request(key, token.encode()),
                                                      timeout=30)
        except grpc.RpcError as error:
            return error.code()  # type: ignore[attr-defined,no-any-return]
    return grpc.StatusCode.OK


def test_devices_counts_enrollments_and_tokens(topo: LocalTopology,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert devices(topo, capsys) == {"devicesEnrolled": 0, "lastEnrolledAt": 0.0,
                                     "tokensUnused": 0, "tokensUsed": 0, "tokensExpired": 0}
    with AdminClient(topo.address("coordinator"), topo.token("admin"),
                     topo.workdir / "tls" / "ca.pem") as admin:
        tokens = admin.mint_tokens(3)
        short_lived = admin.mint_tokens(1, ttl_s=1)[0]  # (the shortest lifetime, a second)
    before = time.time()
    assert [enroll(topo, t) for t in tokens[:2]] == [grpc.StatusCode.OK] * 2
    # refused enrollments change nothing: a used token again, an unknown one, an expired one
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and devices(topo, capsys)["tokensExpired"] == 0:
        pass
    assert [enroll(topo, t) for t in (tokens[0], "ab" * 32, short_lived)] == \
        [grpc.StatusCode.UNAUTHENTICATED] * 3
    shown = devices(topo, capsys)
    assert isinstance(shown["lastEnrolledAt"], float) and shown["lastEnrolledAt"] >= before - 1
    assert str(shown.pop("lastEnrolledUtc")).endswith("+00:00")
    shown.pop("lastEnrolledAt")
    assert shown == {"devicesEnrolled": 2, "tokensUnused": 1, "tokensUsed": 2,
                     "tokensExpired": 1}

    # a restart over the same store keeps every count
    topo.stop("coordinator")
    topo.start_coordinator()
    again = devices(topo, capsys)
    assert (again["devicesEnrolled"], again["tokensUnused"], again["tokensUsed"],
            again["tokensExpired"]) == (2, 1, 2, 1)


def test_devices_wants_the_admin_token(topo: LocalTopology, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    wrong = tmp_path / "wrong.token"
    wrong.write_text("not-the-admin-token\n")
    wrong.chmod(0o600)
    line = one_line_error([*connection(topo, wrong), "devices"], capsys)
    assert "UNAUTHENTICATED" in line or "admin token" in line, line
    with AdminClient(topo.address("coordinator"), topo.token("control"),
                     topo.workdir / "tls" / "ca.pem") as admin, \
            pytest.raises(grpc.RpcError) as error:
        admin.enrollment()
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_store_counts_alike_on_both_backends(backend: str, tmp_path: Path) -> None:
    """The counts are one SQL statement each; PostgreSQL's SUM and MAX types differ from
    SQLite's, so both are read back as plain numbers."""
    from postgres_kit import PostgresServer

    from fedhh_coordinator.store import EnrollmentCounts, Store

    def counts(location: str) -> EnrollmentCounts:
        store = Store(location)
        try:
            assert store.enrollment(now=1000.0) == EnrollmentCounts(0, 0.0, 0, 0, 0)
            store.add_enrollment_tokens([b"a" * 32, b"b" * 32], expires_at=None)
            store.add_enrollment_tokens([b"c" * 32], expires_at=999.0)
            store.add_enrollment_tokens([b"d" * 32], expires_at=2e12)
            store.add_device(b"h" * 32, b"k" * 32, "", token_hash=b"a" * 32)
            found = store.enrollment(now=1000.0)
        finally:
            store.close()
        assert isinstance(found.devices, int) and isinstance(found.last_enrolled_at, float)
        return found

    if backend == "sqlite":
        found = counts(str(tmp_path / "store.sqlite"))
    else:
        with PostgresServer() as pg:
            found = counts(pg.create_database())
    assert found.last_enrolled_at > 1000.0
    # unused: "b" and "d" (not yet expired at now=1000); used: "a"; expired: "c"
    assert (found.devices, found.tokens_unused, found.tokens_used, found.tokens_expired) == \
        (1, 2, 1, 1)
