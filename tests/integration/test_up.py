"""`fedhh up`, the README's first command, end to end on a small fleet (plaintext loopback)."""

from __future__ import annotations

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
    assert "shut down cleanly" in done.stdout
