"""The web client's wire (clients/web/src/wire.ts: @connectrpc/connect-web over Node's fetch)
against the real coordinator and aggregator, started with their Connect ports (TLS from a dev
CA, which Node trusts through NODE_EXTRA_CA_CERTS): it enrols with a minted token, checks in
with fresh round keys, and gets the services' Connect errors for a wrong token, a replayed
enrolment (the token is spent), a wrong credential, low-order round keys and an unknown round. What it enrolled is
the coordinator's record: the credential it got serves the device on the gRPC port too."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import webkit
from networked_kit import COORDINATOR_FLAGS

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh.secagg import RoundKeys
from fedhh.secagg.primitives import system_random
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc

REASON = webkit.skip_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTopology]:
    root = tmp_path_factory.mktemp("web-wire")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as topo:
        topo.start_aggregator(["--web-listen", "127.0.0.1:0"])
        topo.start_coordinator([*COORDINATOR_FLAGS, "--web-listen", "127.0.0.1:0"])
        yield topo


def test_the_web_client_enrols_and_checks_in_over_connect(topo: LocalTopology) -> None:
    try:
        dist = webkit.build()
    except webkit.BuildError as error:
        pytest.fail(str(error))
    ca = topo.workdir / "tls" / "ca.pem"
    with AdminClient(topo.address("coordinator"), topo.token("admin"), ca) as admin:
        token = admin.mint_tokens(1)[0]
    probe = {"coordinator": f"https://{topo.web_address('coordinator')}",
             "aggregator": f"https://{topo.web_address('aggregator')}", "token": token}
    done = subprocess.run(
        [str(webkit.NODE), str(Path(dist) / "test" / "wire_probe.js"), json.dumps(probe)],
        capture_output=True, text=True, timeout=120, cwd=webkit.WEB,
        env={**os.environ, "NODE_EXTRA_CA_CERTS": str(ca)})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    # connect-es's codes are numbers: 3 invalid_argument, 5 not_found, 16 unauthenticated.
    assert out["wrongToken"].startswith("16:"), out
    assert out["replay"] == "16:unknown or already used enrollment token", out  # one-time
    assert out["checkIn"] == "wait:1000", out
    assert out["wrongCredential"] == "16:unknown device or invalid credential", out
    assert out["lowOrderKeys"].startswith("3:the round keys must be"), out
    assert out["unknownRound"].startswith("5:"), out
    public = Path(topo.services["coordinator"].ready["public_key"])
    assert out["coordinatorPublic"] == _raw_public(public).hex()
    # The device it enrolled is the coordinator's: its credential serves it over gRPC as well,
    # and its check-in's round keys are now its own (another device presenting them is refused).
    device_id = int(out["deviceId"])
    bearer = (("authorization", f"Bearer {device_id}.{out['credential']}"),)
    c_pk, s_pk = RoundKeys.generate(system_random).public
    with grpc.secure_channel(topo.address("coordinator"), ca_credentials(ca)) as channel:
        stub = pb_grpc.DeviceServiceStub(channel)
        idle = stub.GetTask(pb.GetTaskRequest(device_id=device_id, wait_ms=1, c_pk=c_pk,
                                              s_pk=s_pk), metadata=bearer, timeout=30)
        assert idle.WhichOneof("outcome") == "retry_after_ms"


def _raw_public(path: Path) -> bytes:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_public_key(path.read_bytes())
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
