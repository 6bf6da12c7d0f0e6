"""`fedhh loadtest` end to end, small: real services and device processes on 127.0.0.1, one
round with injected dropouts, and the report's figures (latencies, bytes, CPU, stage profile)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.cli.main import main

pytestmark = pytest.mark.slow


def test_a_small_load_test_reports_every_figure(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    code = main(["loadtest", "--devices", "60", "--dim", "256", "--dropout", "0.1",
                 "--processes", "2", "--stage-ms", "20000", "--quiet-close-ms", "3000",
                 "--seed", "4",
                 "--workdir", str(tmp_path / "work"), "--json", str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 0, printed
    assert report["state"] == "done"
    released = [r for r in report["rounds"] if r["state"] == "released"]
    assert len(released) == 1 and released[0]["participants"] >= 43  # n_min = 60 * 0.9 * 0.8
    devices = report["devices"]
    assert devices["tasks"] == 60 and devices["failed"] == 0
    assert devices["completed"] + devices["dropped"] == 60
    assert 0 < devices["dropped"] < 17  # seeded draws at rate 0.1
    # The vector (256 x 2 bytes) dominates what a device sends.
    assert 512 < report["bytes_per_device_round"] < 8192
    for rpc in ("GetTask", "AdvertiseKeys", "SubmitShares", "SubmitMaskedVector",
                "SubmitConsistency", "SubmitUnmask"):
        assert report["rpc_latency_ms"][rpc]["count"] > 0, rpc
    stages = [s["stage"] for s in report["stages"]]
    assert stages == ["ADVERTISE_KEYS", "SHARE_KEYS", "MASKED_INPUT", "CONSISTENCY_CHECK",
                      "UNMASK"]
    assert all(s["seconds"] > 0 and s["cpu_s"]["devices"] >= 0 for s in report["stages"])
    for service in ("aggregator", "coordinator", "devices (all processes)"):
        assert report["usage"][service]["cpu_s"] > 0
        assert report["usage"][service]["peak_mib"] > 10
    assert "stages at the aggregator" in printed
