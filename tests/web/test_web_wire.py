"""The web client over the wire (clients/web/src/wire.ts, round.ts, loop.ts:
@connectrpc/connect-web over fetch) against the real coordinator and aggregator, started with
their Connect ports (TLS from a dev CA), in Node (which trusts the CA through
NODE_EXTRA_CA_CERTS) and in a headless Chromium page served from another origin, the one the
services allow (--web-origin), so the CORS preflights are part of every call:

- test/wire_probe.ts enrols with a minted token, checks in with fresh round keys, and gets the
  services' Connect errors for a wrong token, a spent token, a wrong credential, low-order
  round keys and an unknown round; what it enrolled is the coordinator's record (its
  credential serves the device on the gRPC port too);
- test/web_devices.ts runs 5 TypeScript devices, holding the dataset's last 5 users' items,
  through a whole SecAgg+ round beside 195 Python devices on gRPC: enrol, check in, verify the
  task and config, the floors, the report from their items (codec, selection, randomizer,
  budget), every stage signed over the aggregator's Connect port; the round releases the sum
  over all 200.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import webkit
from cryptography.hazmat.primitives import serialization
from networked_kit import COORDINATOR_FLAGS, SHORT, USERS, run_config, short_dataset

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
TS_DEVICES = 5
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fedhh web wire</title></head>
<body>running<script type="module" src="wire.js"></script></body></html>
"""


@pytest.fixture(scope="module")
def dist() -> Path:
    try:
        return webkit.build()
    except webkit.BuildError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def page_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A directory served on an OS-chosen port, and its origin (known before the services
    start, which allow it)."""
    root = tmp_path_factory.mktemp("wire-page")
    with webkit.serve_directory(root) as origin:
        yield root, origin


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory, page_root: tuple[Path, str]
         ) -> Iterator[LocalTopology]:
    root = tmp_path_factory.mktemp("web-wire")
    web = ["--web-listen", "127.0.0.1:0", "--web-origin", page_root[1]]
    data = short_dataset(root / "users.txt")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as topo:
        topo.start_aggregator(web)
        # The tasks name the aggregator's Connect URL; the TypeScript devices dial that one.
        topo.start_coordinator([*COORDINATOR_FLAGS, *web, "--aggregator-web-url",
                                f"https://{topo.web_address('aggregator')}"])
        # gRPC devices for a round beside TypeScript ones (the probes' devices poll no task).
        topo.start_devices("devices-grpc", str(data), f"0:{USERS - TS_DEVICES}")
        topo.wait_for_devices()
        yield topo


def _probe(topo: LocalTopology) -> dict[str, str]:
    with AdminClient(topo.address("coordinator"), topo.token("admin"), _ca(topo)) as admin:
        token = admin.mint_tokens(1)[0]
    return {"coordinator": f"https://{topo.web_address('coordinator')}",
            "aggregator": f"https://{topo.web_address('aggregator')}", "token": token}


def _ca(topo: LocalTopology) -> Path:
    return topo.workdir / "tls" / "ca.pem"


def _check(topo: LocalTopology, out: dict[str, Any]) -> None:
    # connect-es's codes are numbers: 3 invalid_argument, 5 not_found, 16 unauthenticated.
    assert out["wrongToken"].startswith("16:"), out
    assert out["replay"] == "16:unknown or already used enrollment token", out  # one-time
    assert out["checkIn"] == "wait:1000", out
    assert out["wrongCredential"] == "16:unknown device or invalid credential", out
    assert out["lowOrderKeys"].startswith("3:the round keys must be"), out
    assert out["unknownRound"].startswith("5:"), out
    public = serialization.load_pem_public_key(
        Path(topo.services["coordinator"].ready["public_key"]).read_bytes())
    assert out["coordinatorPublic"] == public.public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    # The device it enrolled is the coordinator's: its credential serves it over gRPC too.
    device_id = int(out["deviceId"])
    bearer = (("authorization", f"Bearer {device_id}.{out['credential']}"),)
    c_pk, s_pk = RoundKeys.generate(system_random).public
    with grpc.secure_channel(topo.address("coordinator"), ca_credentials(_ca(topo))) as channel:
        idle = pb_grpc.DeviceServiceStub(channel).GetTask(
            pb.GetTaskRequest(device_id=device_id, wait_ms=1, c_pk=c_pk, s_pk=s_pk),
            metadata=bearer, timeout=30)
        assert idle.WhichOneof("outcome") == "retry_after_ms"


def test_the_web_client_enrols_and_checks_in_from_node(topo: LocalTopology, dist: Path) -> None:
    done = subprocess.run(
        [str(webkit.NODE), str(dist / "test" / "wire_node.js"), json.dumps(_probe(topo))],
        capture_output=True, text=True, timeout=120, cwd=webkit.WEB,
        env={**os.environ, "NODE_EXTRA_CA_CERTS": str(_ca(topo))})
    assert done.returncode == 0, done.stderr[-3000:]
    _check(topo, json.loads(done.stdout))


@pytest.mark.browser
def test_the_web_client_enrols_and_checks_in_from_a_chromium_page(
        topo: LocalTopology, dist: Path, page_root: tuple[Path, str]) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    root, origin = page_root
    shutil.copy(dist / "browser" / "wire.js", root / "wire.js")
    (root / "probe.json").write_text(json.dumps(_probe(topo)))
    (root / "index.html").write_text(PAGE)
    # The services' certificate is signed by the test's own CA, which this throw-away profile
    # cannot be told to trust; the connection is still TLS.
    with webkit.chromium("--ignore-certificate-errors") as browser:
        browser.get(f"{origin}/index.html")
        out = WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(
            lambda driver: driver.execute_script("return window.fedhhWire || null"))
    assert "error" not in out, out
    _check(topo, out)


DEVICES_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fedhh web devices</title></head>
<body>starting<script type="module" src="devices.js"></script></body></html>
"""


def _fleet(topo: LocalTopology, admin: AdminClient) -> dict[str, Any]:
    """The TypeScript devices: the dataset's last users (the gRPC process hosts the others)."""
    users = (topo.workdir.parent / "users.txt").read_text().splitlines()
    return {"coordinator": f"https://{topo.web_address('coordinator')}",
            "aggregator": f"https://{topo.web_address('aggregator')}",
            "tokens": admin.mint_tokens(TS_DEVICES),
            "items": [line.split() for line in users[USERS - TS_DEVICES:USERS]]}


def _run_beside_grpc(topo: LocalTopology, admin: AdminClient, run_id: str) -> pb.Run:
    """A one-round run once the TypeScript devices are enrolled and polling: the check-in
    waits for all 200 target devices, 195 gRPC ones and these."""
    admin.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10), run_id=run_id)
    return admin.wait(run_id, 300)


def _check_round(topo: LocalTopology, run: pb.Run, results: list[dict[str, Any]]) -> None:
    assert run.state == "done", run.error
    released = [r for r in run.rounds if r.state == "released"]
    assert len(released) == 1 and released[0].participants == USERS
    # Each contributed its masked input; its unmask shares went in, or came after the round had
    # enough of them ("late", FAILED_PRECONDITION), which the Python devices count the same way.
    assert [(r["runId"], r["contributed"]) for r in results] == \
        [(run.run_id, True)] * TS_DEVICES, json.dumps(results)
    assert all(r["outcome"] == "completed" or (r["outcome"] == "late" and r["reached"] == 4)
               for r in results), json.dumps(results)
    # The round's ε is told with its stages, as the report is made (the page shows it at once:
    # before, a page closed mid-round had shown and posted 0).
    assert all(r["stageSpent"] == r["spent"] > 0 for r in results), json.dumps(results)
    # The released sum holds the TypeScript devices' masked inputs: had their masks not
    # cancelled, the sum would be noise and the planted items would not stand out.
    with AdminClient(topo.address("coordinator"), topo.token("admin"), _ca(topo)) as admin:
        found = {h.item for h in admin.results(run.run_id).heavy_hitters}
    assert set(SHORT) <= found


def _check_audit(audit: dict[str, Any]) -> None:
    """No call of the devices carried a secret they drew (test/web_devices.ts, `audit`): the
    identity seed, the round keys' secrets and the self-mask seed, at least 4 a device, over
    every call, masked vectors of 1,024 entries included."""
    assert audit["leaks"] == [], audit
    assert audit["secrets"] >= 4 * TS_DEVICES, audit
    assert audit["calls"] >= 6 * TS_DEVICES and audit["bytesSent"] >= 1024 * TS_DEVICES, audit


def test_typescript_devices_take_part_in_a_round_from_node(topo: LocalTopology, dist: Path
                                                          ) -> None:
    """5 TypeScript devices (src/loop.ts, src/round.ts over connect-web) in Node enrol, check
    in, verify their tasks and run the whole SecAgg+ round through the Connect ports, beside
    195 Python devices on gRPC: the round releases the sum of all 200."""
    with AdminClient(topo.address("coordinator"), topo.token("admin"), _ca(topo)) as admin:
        node = subprocess.Popen(
            [str(webkit.NODE), str(dist / "test" / "web_devices_node.js"),
             json.dumps({**_fleet(topo, admin), "audit": True})],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=webkit.WEB,
            env={**os.environ, "NODE_EXTRA_CA_CERTS": str(_ca(topo))})
        try:
            assert node.stdout is not None
            assert json.loads(node.stdout.readline()) == {"enrolled": TS_DEVICES}
            run = _run_beside_grpc(topo, admin, "node")
            out, err = node.communicate(timeout=120)
        finally:
            if node.poll() is None:
                node.kill()
                node.wait()
    assert node.returncode == 0, err[-3000:]
    _check_round(topo, run, json.loads(out)["results"])
    _check_audit(json.loads(out)["audit"])


@pytest.mark.browser
def test_typescript_devices_take_part_in_a_round_from_a_chromium_page(
        topo: LocalTopology, dist: Path, page_root: tuple[Path, str]) -> None:
    """The same 5 devices in one headless Chromium page on the allowed origin: WebCrypto's
    primitives, fetch and the services' CORS answers on every call of the round."""
    from selenium.webdriver.support.ui import WebDriverWait

    root, origin = page_root
    shutil.copy(dist / "browser" / "devices.js", root / "devices.js")
    (root / "devices.html").write_text(DEVICES_PAGE)
    with AdminClient(topo.address("coordinator"), topo.token("admin"), _ca(topo)) as admin, \
            webkit.chromium("--ignore-certificate-errors") as browser:
        (root / "fleet.json").write_text(json.dumps({**_fleet(topo, admin), "audit": True}))
        browser.get(f"{origin}/devices.html")
        state = WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(
            lambda driver: driver.execute_script("return window.fedhhDevices || null"))
        assert state.get("enrolled") == TS_DEVICES, state
        run = _run_beside_grpc(topo, admin, "chromium")
        state = WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(
            lambda driver: driver.execute_script(
                "const s = window.fedhhDevices; return s && (s.results || s.error) ? s : null"))
    assert "error" not in state, state
    _check_round(topo, run, state["results"])
    _check_audit(state["audit"])
