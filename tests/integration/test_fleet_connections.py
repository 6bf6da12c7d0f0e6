"""A device process whose devices outnumber what one connection to the aggregator admits: each
device's session stream stays open for its whole round, so devices beyond the aggregator's
--max-streams-per-connection on one shared connection waited for a stream only a finished
session frees, while the stage waited for them. A fleet spreads its devices over connections
(--devices-per-connection), and the round releases over every device: over gRPC, and over the
aggregator's framed session port, which the task names and the devices then use (its streams
counted by port in the aggregator's metrics); where the task names a session port nobody
serves (a firewall that lets only the gRPC port through), the devices fall back on the gRPC
stream and the round releases all the same. The devices' task calls (and enrolments) go the
same way: to the coordinator's framed port, which --coordinator names, by default; over gRPC
when asked; over gRPC again when the framed port named cannot be reached. Over gRPC each
device's GetTask long-poll holds a stream at the coordinator, which caps them per connection
as the aggregator does: the fleet spreads them over connections alike (before, all 200 on one
connection, 32 served at once, the rest queued behind polls that waited out the check-in)."""

from __future__ import annotations

import re
import ssl
import urllib.request
from pathlib import Path

import pytest
from networked_kit import (
    COORDINATOR_FLAGS,
    SHORT,
    USERS,
    refused_port,
    run_config,
    short_dataset,
)

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.topology import LocalTopology

pytestmark = pytest.mark.slow


def _counts(topo: LocalTopology, name: str, metric: str, label: str) -> dict[str, float]:
    """The service's counter ``metric`` so far, by the value of its one ``label``."""
    port = topo.services[name].ready["metrics_port"]
    tls = ssl.create_default_context(cafile=str(topo.workdir / "tls" / "ca.pem"))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=30,
                                context=tls) as page:
        text = page.read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(
        rf'^{metric}\{{{label}="([^"]+)"\}} (\S+)$', text, re.M)}


@pytest.mark.parametrize("transport", ["framed", "stream", "framed-unreachable"])
def test_a_fleet_beyond_one_connections_stream_cap_spreads_over_connections(
        tmp_path: Path, transport: str) -> None:
    data = short_dataset(tmp_path / "users.txt")
    # (the ports nobody serves stay held by the test, refusing, until every service stopped)
    with refused_port() as no_session, refused_port() as no_frames, \
            LocalTopology(tmp_path / "topology", env={"FEDHH_CACHE": str(tmp_path / "cache")}
                          ) as topo:
        topo.start_aggregator(["--max-streams-per-connection", "32", "--metrics-port", "0"])
        unreachable = (["--aggregator-session-address", f"127.0.0.1:{no_session}"]
                       if transport == "framed-unreachable" else [])
        # (the coordinator's cap as the aggregator's: the devices' task calls spread too)
        topo.start_coordinator([*COORDINATOR_FLAGS, *unreachable, "--metrics-port", "0",
                                "--max-streams-per-connection", "32"])
        # (the last flag counts)
        tasks = (["--task-transport", "grpc"] if transport == "stream" else
                 ["--coordinator", f"{topo.address('coordinator')}=127.0.0.1:{no_frames}"]
                 if transport == "framed-unreachable" else [])
        # 200 devices, 20 to a connection: 10 connections of at most 20 streams each.
        topo.start_devices("devices", str(data), f"0:{USERS}",
                           ["--devices-per-connection", "20",
                            "--aggregator-transport", transport.split("-")[0], *tasks])
        topo.wait_for_devices()
        with AdminClient(topo.address("coordinator"), topo.token("admin"),
                         topo.workdir / "tls" / "ca.pem") as admin:
            admin.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10,
                                       stage_ms=60_000), run_id="spread")
            run = admin.wait("spread", 300)
            results = admin.results("spread")
        opens = _counts(topo, "aggregator", "fedhh_aggregator_session_opens_total", "port")
        framed_calls = _counts(topo, "coordinator", "fedhh_framed_calls_total", "method")
    assert run.state == "done", run.error
    [round_] = run.rounds
    assert round_.state == "released" and round_.participants == USERS, round_
    assert set(SHORT) <= {h.item for h in results.heavy_hitters}
    # Every device's session went over the port asked for (at least one stream each).
    used, unused = ("framed", "grpc") if transport == "framed" else ("grpc", "framed")
    assert opens.get(used, 0) >= USERS and opens.get(unused, 0) == 0, opens
    # And every device's task calls and enrolment: on the framed port only when it is named
    # and reachable (GetTask: at least one call each, the one that brought its task).
    framed_tasks = transport == "framed"
    for method in ("GetTask", "Enroll"):
        count = framed_calls.get(f"/fedhh.v1.DeviceService/{method}", 0)
        assert count >= USERS if framed_tasks else count == 0, (method, framed_calls)
