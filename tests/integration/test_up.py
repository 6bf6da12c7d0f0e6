"""`fedhh up`, the README's first command, end to end on a small fleet (plaintext loopback)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_fedhh_up_runs_a_discovery_and_shuts_down(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-m", "fedhh.cli.main", "up", "--devices", "150", "--processes", "2",
         "--insecure", "--workdir", str(tmp_path / "up"), "--rounds", "4",
         "--checkin-ms", "20000", "--stage-ms", "20000"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "run demo: done" in done.stdout
    assert "privacy spent: eps_agg" in done.stdout
    assert "kept  exp-fp  found" in done.stdout
    assert "Noise alone is expected to lift about " in done.stdout
    assert "shut down cleanly" in done.stdout


def test_fedhh_up_web_runs_devices_over_the_connect_ports(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`fedhh up --web`: the services serve their Connect ports, and the last device process,
    which speaks only Connect, takes part in every round beside the gRPC one."""
    done = subprocess.run(
        [sys.executable, "-m", "fedhh.cli.main", "up", "--devices", "150", "--processes", "2",
         "--insecure", "--web", "--workdir", str(tmp_path / "up"), "--rounds", "4",
         "--checkin-ms", "20000", "--stage-ms", "20000"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Connect ports (web devices): coordinator http://127.0.0.1:" in done.stdout
    assert "75 of the devices use them" in done.stdout
    assert "run demo: done" in done.stdout
    assert "round 1 attempt 1: released: 150 contributors" in done.stdout
    stats = json.loads((tmp_path / "up" / "devices-1.stats.json").read_text())
    assert stats["devices"] == 75 and stats["completed"] >= 75 and stats["failed"] == 0
