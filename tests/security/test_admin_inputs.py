"""Text a client chooses, on either store (SQLite, PostgreSQL), against a real coordinator on
127.0.0.1. Before: a NUL in a run id (GetRun, GetResults, CancelRun) or in a label
(MintEnrollmentTokens, Enroll) was "INTERNAL: internal error" on PostgreSQL, whose text cannot
hold one, and was stored as given on SQLite, newlines and terminal escapes too; StartRun took
"r1\\n" (``^...$`` matches before a final newline), a second run that lists as "r1" does. Now
each is a specific error on both stores and nothing is written."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from postgres_kit import PostgresServer

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.device_users import enroll_request
from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

BAD_LABELS = ("a\x00b", "two\nlines", "\x1b[31mred", "\u202eevil", "tab\there")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def topo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[LocalTopology]:
    root = tmp_path_factory.mktemp(f"probe35-inputs-{request.param}")
    with PostgresServer() if request.param == "postgresql" else _Nothing() as pg:
        database = pg.create_database() if pg is not None else None
        with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")},
                           database=database) as t:
            t.start_aggregator()
            t.start_coordinator()
            yield t


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def admin(topo: LocalTopology) -> AdminClient:
    return AdminClient(topo.address("coordinator"), topo.token("admin"),
                       topo.workdir / "tls" / "ca.pem")


def failure(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as error:
        call()  # type: ignore[operator]
    return error.value.code(), error.value.details()  # type: ignore[attr-defined]


def counts(client: AdminClient) -> tuple[int, int, int]:
    e = client.enrollment()
    return e.devices_enrolled, e.tokens_unused, e.tokens_used


def test_run_ids_with_a_nul_are_unknown_runs(topo: LocalTopology) -> None:
    with admin(topo) as client:
        for call in (client.run, client.results, client.cancel):
            code, details = failure(lambda c=call: c("r1\x00"))
            assert code == grpc.StatusCode.NOT_FOUND, (code, details)
            assert "unknown run 'r1\\x00'" in details and "64 characters" in details
        assert client.runs() == []


def test_a_run_id_with_a_final_newline_is_refused(topo: LocalTopology) -> None:
    config = pb.RunConfig(rounds=4, max_bits=16)
    with admin(topo) as client:
        for run_id in ("r1\n", "r1\r\n", "\nr1"):
            code, details = failure(lambda r=run_id: client.start_run(config, r))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
            assert details.startswith("run_id must be 1 to 64 characters of A-Z"), details
        assert client.runs() == []


def test_labels_that_are_not_printable_text_are_refused_and_mint_nothing(
        topo: LocalTopology) -> None:
    with admin(topo) as client:
        before = counts(client)
        for label in BAD_LABELS:
            code, details = failure(lambda lab=label: client.mint_tokens(1, label=lab))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
            assert details.startswith("label must be printable text"), details
        assert counts(client) == before
        assert len(client.mint_tokens(1, label="batch 7 (ok) ünïcode")) == 1
        assert counts(client)[1] == before[1] + 1


def test_a_device_label_that_is_not_printable_spends_no_token(topo: LocalTopology) -> None:
    with admin(topo) as client:
        token = client.mint_tokens(1)[0].encode()
        before = counts(client)
    key = Ed25519PrivateKey.generate()
    with grpc.secure_channel(topo.address("coordinator"),
                             ca_credentials(topo.workdir / "tls" / "ca.pem")) as channel:
        stub = pb_grpc.DeviceServiceStub(channel)
        for label in BAD_LABELS:
            code, details = failure(lambda lab=label: stub.Enroll(enroll_request(
                key, token, label=lab), timeout=30))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
        with admin(topo) as client:
            assert counts(client) == before
        # the token was not spent: it enrolls the same key with a printable label
        stub.Enroll(enroll_request(key, token, label="user-7"), timeout=30)
    with admin(topo) as client:
        assert counts(client) == (before[0] + 1, before[1] - 1, before[2] + 1)
