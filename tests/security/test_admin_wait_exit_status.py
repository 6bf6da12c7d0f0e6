"""`fedhh admin wait` exits 0 only for a run that is done (outside probe, thirty-sixth stop).

Before, it exited 0 whatever the run's end, so `admin wait r1 && admin results r1` (README.md)
and the Kubernetes start-run Job (`set -e`; deploy/k8s/overlays/dev/start-run.yaml) went on
as if a failed or cancelled run had found its heavy hitters. Now such a run is printed as
before (the JSON on stdout) and the command exits 1 naming how the run ended and why, on
stderr. A real coordinator on 127.0.0.1, with no devices: its runs fail or are cancelled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2 as pb

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTopology]:
    root = tmp_path_factory.mktemp("probe36-wait")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as t:
        t.start_aggregator()
        t.start_coordinator()
        yield t


def admin(topo: LocalTopology, *args: str) -> list[str]:
    return ["admin", "--coordinator", topo.address("coordinator"),
            "--ca", str(topo.workdir / "tls" / "ca.pem"),
            "--token-file", str(topo.workdir / "admin.token"), *args]


def test_wait_exits_1_for_a_failed_run_and_a_cancelled_one(
        topo: LocalTopology, capsys: pytest.CaptureFixture[str]) -> None:
    config = pb.RunConfig(rounds=1, max_bits=10, target_devices=300, min_devices=200,
                          checkin_ms=300, max_attempts=1)
    with AdminClient(topo.address("coordinator"), topo.token("admin"),
                     topo.workdir / "tls" / "ca.pem") as client:
        client.start_run(config, "nobody-came")
        client.start_run(config, "stopped")  # pending behind the first
        client.cancel("stopped")
    capsys.readouterr()
    assert main(admin(topo, "wait", "nobody-came")) == 1
    out, err = capsys.readouterr()
    run = json.loads(out)
    assert run["state"] == "failed" and run["error"], run
    assert f"fedhh admin wait: run nobody-came ended failed: {run['error']}" in err, err
    assert main(admin(topo, "wait", "stopped")) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["state"] == "cancelled"
    assert "fedhh admin wait: run stopped ended cancelled: cancelled by the operator" in err, err
    # Reading a run that ended stays 0: status and results say what is there.
    assert main(admin(topo, "status", "nobody-came")) == 0


def test_the_docs_chain_wait_before_results(topo: LocalTopology) -> None:
    """The chains this exit status serves (README.md, the k8s Job) are still written so."""
    root = Path(__file__).resolve().parents[2]
    assert "admin wait r1 && docker compose run --rm admin results r1" in (
        root / "README.md").read_text()
    job = (root / "deploy" / "k8s" / "overlays" / "dev" / "start-run.yaml").read_text()
    assert "set -e" in job and job.index('admin wait "$FEDHH_RUN_ID"') < job.index(
        'admin results "$FEDHH_RUN_ID"')
