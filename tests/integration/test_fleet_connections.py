"""A device process whose devices outnumber what one connection to the aggregator admits: each
device's session stream stays open for its whole round, so devices beyond the aggregator's
--max-streams-per-connection on one shared connection waited for a stream only a finished
session frees, while the stage waited for them. A fleet spreads its devices over connections
(--devices-per-connection), and the round releases over every device: over gRPC, and over the
aggregator's framed session port, which the task names and the devices then use (its streams
counted by port in the aggregator's metrics); where the task names a session port nobody
serves (a firewall that lets only the gRPC port through), the devices fall back on the gRPC
stream and the round releases all the same."""

from __future__ import annotations

import re
import socket
import ssl
import urllib.request
from pathlib import Path

import pytest
from networked_kit import COORDINATOR_FLAGS, SHORT, USERS, run_config, short_dataset

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.topology import LocalTopology

pytestmark = pytest.mark.slow


def _session_opens(topo: LocalTopology, name: str) -> dict[str, float]:
    """The aggregator's session streams opened so far, by port."""
    port = topo.services[name].ready["metrics_port"]
    tls = ssl.create_default_context(cafile=str(topo.workdir / "tls" / "ca.pem"))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=30,
                                context=tls) as page:
        text = page.read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(
        r'^fedhh_aggregator_session_opens_total\{port="(\w+)"\} (\S+)$', text, re.M)}


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("transport", ["framed", "stream", "framed-unreachable"])
def test_a_fleet_beyond_one_connections_stream_cap_spreads_over_connections(
        tmp_path: Path, transport: str) -> None:
    data = short_dataset(tmp_path / "users.txt")
    with LocalTopology(tmp_path / "topology", env={"FEDHH_CACHE": str(tmp_path / "cache")}
                       ) as topo:
        topo.start_aggregator(["--max-streams-per-connection", "32", "--metrics-port", "0"])
        unreachable = (["--aggregator-session-address", f"127.0.0.1:{_unused_port()}"]
                       if transport == "framed-unreachable" else [])
        topo.start_coordinator([*COORDINATOR_FLAGS, *unreachable])  # (the last flag counts)
        # 200 devices, 20 to a connection: 10 connections of at most 20 streams each.
        topo.start_devices("devices", str(data), f"0:{USERS}",
                           ["--devices-per-connection", "20",
                            "--aggregator-transport", transport.split("-")[0]])
        topo.wait_for_devices()
        with AdminClient(topo.address("coordinator"), topo.token("admin"),
                         topo.workdir / "tls" / "ca.pem") as admin:
            admin.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10,
                                       stage_ms=60_000), run_id="spread")
            run = admin.wait("spread", 300)
            results = admin.results("spread")
        opens = _session_opens(topo, "aggregator")
    assert run.state == "done", run.error
    [round_] = run.rounds
    assert round_.state == "released" and round_.participants == USERS, round_
    assert set(SHORT) <= {h.item for h in results.heavy_hitters}
    # Every device's session went over the port asked for (at least one stream each).
    used, unused = ("framed", "grpc") if transport == "framed" else ("grpc", "framed")
    assert opens.get(used, 0) >= USERS and opens.get(unused, 0) == 0, opens
