"""The Connect port (fedhh/rpc/connect.py) with real processes on 127.0.0.1 and TLS from a dev
CA: devices that speak only the Connect protocol over HTTP/1.1 (an aiohttp client,
``fedhh device --connect``) enrol, get their tasks and take part in the SecAgg+ round beside
gRPC devices, and the run equals the per-device simulation with the same seed; bad requests
are answered with Connect errors before anything changes."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from networked_kit import (
    COORDINATOR_FLAGS,
    SEED,
    SHORT,
    USERS,
    run_config,
    short_dataset,
    stop_cleanly,
)

from fedhh.data.registry import resolve_dataset
from fedhh.privacy import PrivacyLedger
from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.device_users import enroll_request
from fedhh.rpc.run_config import from_proto
from fedhh.rpc.topology import LocalTopology
from fedhh.secagg import RoundKeys
from fedhh.secagg.primitives import system_random
from fedhh.simulation.runner import simulate
from fedhh.v1 import aggregator_pb2 as agg_pb
from fedhh.v1 import coordinator_pb2 as pb

pytestmark = pytest.mark.slow

WEB_USERS = (190, 200)  # hosted by the Connect device process; the rest speak gRPC
ORIGIN = "https://devices.example"
ENROLL = "/fedhh.v1.DeviceService/Enroll"
GET_TASK = "/fedhh.v1.DeviceService/GetTask"
PROTO = {"Content-Type": "application/proto"}


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTopology, Path]]:
    root = tmp_path_factory.mktemp("connect")
    data = short_dataset(root / "users.txt")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as topo:
        topo.start_aggregator(["--web-listen", "127.0.0.1:0"])
        topo.start_coordinator([*COORDINATOR_FLAGS, "--web-listen", "127.0.0.1:0",
                                "--web-origin", ORIGIN])
        seed = ["--seed", str(SEED)]
        topo.start_devices("devices-grpc", str(data), f"0:{WEB_USERS[0]}", seed)
        topo.start_devices("devices-web", str(data), "{}:{}".format(*WEB_USERS), seed,
                           connect=True)
        topo.wait_for_devices()
        yield topo, data


def admin(topo: LocalTopology) -> AdminClient:
    return AdminClient(topo.address("coordinator"), topo.token("admin"),
                       topo.workdir / "tls" / "ca.pem")


@pytest.fixture(scope="module")
def finished_run(system: tuple[LocalTopology, Path]) -> tuple[pb.Run, pb.Results]:
    topo, _ = system
    with admin(topo) as client:
        client.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10), run_id="mixed")
        run = client.wait("mixed", 300)
        return run, client.results("mixed")


def test_connect_devices_take_part_beside_grpc_devices(
        system: tuple[LocalTopology, Path], finished_run: tuple[pb.Run, pb.Results]) -> None:
    topo, data = system
    run, results = finished_run
    assert run.state == "done", run.error
    released = [r for r in run.rounds if r.state == "released"]
    assert released and all(r.participants == USERS for r in released)
    assert set(SHORT) <= {h.item for h in results.heavy_hitters}
    # The released sums carried every report: the run is the per-device simulation of the same
    # seeded devices, estimate for estimate.
    dataset = resolve_dataset(str(data), cache_dir=topo.workdir.parent / "cache")
    cfg = run.config
    ledger = PrivacyLedger.open(cfg.eps_agg, cfg.delta, cfg.rounds, cfg.min_devices,
                                eps_local=cfg.eps_local)
    sim = simulate(dataset, replace(from_proto(cfg), seed=SEED, per_device=True), ledger=ledger)
    assert [(h.item, h.estimate, h.round) for h in results.heavy_hitters] == \
        [(h.item, h.estimate, h.round) for h in sim.heavy_hitters]
    # The Connect devices completed every round; they were given only the web ports.
    stop_cleanly(topo, "devices-web")  # (it writes its stats file as it stops)
    stats = json.loads((topo.workdir / "devices-web.stats.json").read_text())
    web_devices = WEB_USERS[1] - WEB_USERS[0]
    assert stats["completed"] == web_devices * len(released) and stats["failed"] == 0
    assert {"Enroll", "GetTask", "AdvertiseKeys", "SubmitShares", "SubmitMaskedVector",
            "SubmitUnmask"} <= set(stats["rpc_seconds"])
    args = topo.services["devices-web"].args
    assert args[args.index("--coordinator") + 1] == topo.web_address("coordinator")


# ---- bad requests ----------------------------------------------------------------------------
def _ssl(topo: LocalTopology) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(topo.workdir / "tls" / "ca.pem"))


async def _post(session: aiohttp.ClientSession, url: str, body: bytes,
                headers: dict[str, str]) -> tuple[int, dict[str, Any], Any]:
    async with session.post(url, data=body, headers=headers) as answer:
        raw = await answer.read()
        parsed = json.loads(raw) if answer.content_type == "application/json" else raw
        return answer.status, dict(answer.headers), parsed


async def _head_only(topo: LocalTopology, service: str, path: str, headers: dict[str, str],
                     length: int) -> tuple[int, Any]:
    """Send a request head that declares ``length`` bytes of body and no byte of it: the
    answer comes all the same when the port refuses the call before reading its body."""
    host, port = topo.web_address(service).split(":")
    reader, writer = await asyncio.open_connection(host, int(port), ssl=_ssl(topo),
                                                   server_hostname="localhost")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {length}",
             *(f"{k}: {v}" for k, v in headers.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 30)  # the port closes the connection
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_coordinator_port_refuses_bad_requests_and_changes_nothing(
        system: tuple[LocalTopology, Path]) -> None:
    topo, _ = system
    with admin(topo) as client:
        token = client.mint_tokens(1)[0].encode()
    base = f"https://{topo.web_address('coordinator')}"
    private = Ed25519PrivateKey.generate()
    signed = enroll_request(private, token, label="connect probe")
    key = signed.identity_public_key
    enroll = signed.SerializeToString()

    async def probe() -> None:
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=_ssl(topo))) as session:
            refused = [  # (path, body, headers, HTTP status, Connect code)
                (ENROLL, enroll, {"Content-Type": "application/json"}, 415, "unimplemented"),
                (ENROLL, enroll, {**PROTO, "Content-Encoding": "gzip"}, 501, "unimplemented"),
                (ENROLL, enroll, {**PROTO, "Connect-Timeout-Ms": "soon"}, 400,
                 "invalid_argument"),
                (ENROLL, enroll, {**PROTO, "Connect-Protocol-Version": "2"}, 400,
                 "invalid_argument"),
                (ENROLL, enroll, {**PROTO, "Origin": "https://evil.example"}, 403,
                 "permission_denied"),
                (ENROLL, b"\x0a\xff\xff", PROTO, 400, "invalid_argument"),
                ("/fedhh.v1.DeviceService/Nothing", enroll, PROTO, 404, "unimplemented"),
                # The admin API is not on this port at all.
                ("/fedhh.v1.AdminService/MintEnrollmentTokens", b"", PROTO, 404,
                 "unimplemented"),
                (GET_TASK, b"", {**PROTO, "Authorization": "Bearer 1." + "00" * 32}, 401,
                 "unauthenticated"),
            ]
            for path, body, headers, status, code in refused:
                got = await _post(session, base + path, body, headers)
                assert (got[0], got[2]["code"]) == (status, code), (path, headers, got)
                assert got[1]["Content-Type"].startswith("application/json")
                assert "Access-Control-Allow-Origin" not in got[1]
            # Over the 1 MiB receive cap: refused unread. Without credentials: refused before
            # the body, whatever its size.
            for path, headers, status, code in [
                    (ENROLL, PROTO, 429, "resource_exhausted"),
                    (GET_TASK, PROTO, 401, "unauthenticated")]:
                got2 = await _head_only(topo, "coordinator", path, headers, 2 << 20)
                assert (got2[0], got2[1]["code"]) == (status, code), (path, got2)
            async with session.get(base + ENROLL) as answer:
                assert answer.status == 405 and answer.headers["Allow"] == "POST"
            # A wrong token: the servicer's AuthenticationError, mapped as gRPC maps it.
            wrong = pb.EnrollRequest(enrollment_token=b"ab" * 32, identity_public_key=key)
            got = await _post(session, base + ENROLL, wrong.SerializeToString(), PROTO)
            assert (got[0], got[2]["code"]) == (401, "unauthenticated")
            # The token with the device's public key, unsigned (whoever has a leaked token
            # and the key, not its private half): refused over HTTP as over gRPC.
            unsigned = pb.EnrollRequest(enrollment_token=token, identity_public_key=key,
                                        label="connect probe")
            got = await _post(session, base + ENROLL, unsigned.SerializeToString(), PROTO)
            assert (got[0], got[2]["code"]) == (401, "unauthenticated"), got
            assert "enrollment_signature is missing" in got[2]["message"], got
            # CORS: the configured origin may call; any other gets no preflight.
            preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                         "Access-Control-Request-Headers": "content-type,authorization"}
            async with session.options(base + GET_TASK, headers=preflight) as answer:
                assert answer.status == 204
                assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
                assert "Authorization" in answer.headers["Access-Control-Allow-Headers"]
            async with session.options(base + GET_TASK, headers={
                    **preflight, "Origin": "https://evil.example"}) as answer:
                assert answer.status == 403
                assert "Access-Control-Allow-Origin" not in answer.headers
            # Nothing was spent: the token still enrols, once, from the configured origin.
            status, headers, body = await _post(session, base + ENROLL, enroll,
                                                {**PROTO, "Origin": ORIGIN})
            assert status == 200 and headers["Access-Control-Allow-Origin"] == ORIGIN
            first = pb.EnrollResponse.FromString(body)
            # The same request again (its answer lost): the same device, a new credential that
            # replaces the first (Store.add_device's re-issue window).
            status, _, body = await _post(session, base + ENROLL, enroll, PROTO)
            assert status == 200
            enrolled = pb.EnrollResponse.FromString(body)
            assert enrolled.device_id == first.device_id
            assert enrolled.credential != first.credential
            bearer = {**PROTO, "Authorization":
                      f"Bearer {enrolled.device_id}.{enrolled.credential.hex()}"}
            c_pk, s_pk = RoundKeys.generate(system_random).public
            poll = pb.GetTaskRequest(device_id=enrolled.device_id, c_pk=c_pk, s_pk=s_pk)
            got = await _post(session, base + GET_TASK, poll.SerializeToString(), {
                **PROTO, "Authorization": f"Bearer {first.device_id}.{first.credential.hex()}"})
            assert (got[0], got[2]["code"]) == (401, "unauthenticated")
            # Connect-Timeout-Ms bounds a long-poll; the ended call frees the device's slot.
            poll.wait_ms = 60_000
            got = await _post(session, base + GET_TASK, poll.SerializeToString(),
                              {**bearer, "Connect-Timeout-Ms": "300"})
            assert (got[0], got[2]["code"]) == (504, "deadline_exceeded")
            poll.wait_ms = 1
            status, _, body = await _post(session, base + GET_TASK, poll.SerializeToString(),
                                          bearer)
            assert status == 200
            assert pb.GetTaskResponse.FromString(body).WhichOneof("outcome") == "retry_after_ms"

    asyncio.run(probe())


def test_aggregator_port_refuses_bad_requests(system: tuple[LocalTopology, Path]) -> None:
    topo, _ = system
    base = f"https://{topo.web_address('aggregator')}/fedhh.v1."
    unknown_round = agg_pb.AwaitStageRequest(session_id=b"\x01" * 32, stage=1, wait_ms=1)

    async def probe() -> None:
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=_ssl(topo))) as session:
            for path, body, status, code in [
                ("SecureAggregation/AwaitStage", unknown_round.SerializeToString(), 404,
                 "not_found"),
                ("SecureAggregation/AwaitStage", b"\x0a\x05ab", 400, "invalid_argument"),
                ("SecureAggregation/SubmitMaskedVector", b"", 400, "invalid_argument"),
                # The client-streaming upload and the control API are not served here.
                ("SecureAggregation/SubmitMaskedInput", b"", 404, "unimplemented"),
                ("AggregatorControl/OpenRound", b"", 404, "unimplemented"),
            ]:
                got = await _post(session, base + path, body, PROTO)
                assert (got[0], got[2]["code"]) == (status, code), (path, got)
        got2 = await _head_only(topo, "aggregator", "/fedhh.v1.SecureAggregation/"
                                "SubmitMaskedVector", PROTO, (16 << 20) + 1)
        assert (got2[0], got2[1]["code"]) == (429, "resource_exhausted")

    asyncio.run(probe())
