"""`fedhh data generate` stopped by SIGTERM (docker stop, systemd, `kill`) as by Ctrl-C: exit
130 and nothing left beside --out (before: SIGTERM killed it outright and left its scratch
folder, tens of MB to gigabytes, next to the dataset)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DEADLINE_S = 600.0  # a deadline, not a window: the word tables take ~20 s on a quiet machine


def test_sigterm_during_generation_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "datasets" / "reddit"
    process = subprocess.Popen(
        [sys.executable, "-m", "fedhh.cli.main", "data", "generate", "synthetic-reddit-small",
         "--users", "400000", "--out", str(out), "--cache-dir", str(tmp_path / "cache")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not list(out.parent.glob(".gen-*")):  # the users are being generated
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "no scratch folder within the deadline"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert stderr.strip().endswith("fedhh data: interrupted"), stderr
    assert list(out.parent.iterdir()) == []
