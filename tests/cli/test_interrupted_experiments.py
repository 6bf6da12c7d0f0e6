"""`fedhh experiments` stopped by SIGTERM (docker stop, systemd, `kill`, `timeout`) as by
Ctrl-C while it builds a dataset: exit 130, one line, and no scratch folder left in the cache
(before: SIGTERM killed it outright, leaving 440 MB to 4 GB of a half-built synthetic-reddit,
and its pool workers' BrokenPipeError tracebacks). The Dask modes are tested in
tests/unit/experiments/test_cluster.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DEADLINE_S = 600.0  # a deadline, not a window: the word tables take ~20 s on a quiet machine


def test_sigterm_while_a_dataset_is_built_leaves_nothing_behind(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # dev-reddit-400k: the synthetic-reddit generator at 400,000 users, built into the cache
    # before the first run (seconds of generation: time for the signal to find it at work).
    process = subprocess.Popen(
        [sys.executable, "-m", "fedhh.cli.main", "experiments", "segmentation", "--dataset",
         "dev-reddit-400k", "--seeds", "1", "--quiet", "--store", str(tmp_path / "store"),
         "--out", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "FEDHH_CACHE": str(cache),
             "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not list(cache.glob(".gen-*")):  # the users are being generated
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
    assert stderr == "fedhh experiments: interrupted\n"
    # (the build's lock file stays, as after `fedhh data generate`: it holds no data)
    assert [p.name for p in cache.iterdir() if p.suffix != ".lock"] == []
