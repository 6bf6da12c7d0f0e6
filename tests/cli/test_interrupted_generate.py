"""A dataset build stopped by SIGTERM (docker stop, systemd, `kill`, `timeout`) as by Ctrl-C:
exit 130, one line, and no scratch folder left, whether `fedhh data generate` or `fedhh
experiments` builds it (before: SIGTERM killed either outright and left its scratch folder, tens
of MB to gigabytes, and experiments' pool workers' BrokenPipeError tracebacks). The Dask modes
of experiments are tested in tests/unit/experiments/test_cluster.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DEADLINE_S = 600.0  # a deadline, not a window: the word tables take ~20 s on a quiet machine


def terminated_while_generating(arguments: list[str], scratch_parent: Path,
                                env: dict[str, str] | None = None) -> tuple[int, str]:
    """``fedhh ARGUMENTS`` sent SIGTERM once its users are being generated (a scratch folder
    in ``scratch_parent``): its exit code and stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fedhh.cli.main", *arguments],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not list(scratch_parent.glob(".gen-*")):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "no scratch folder within the deadline"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stderr


def test_sigterm_during_generation_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "datasets" / "reddit"
    code, stderr = terminated_while_generating(
        ["data", "generate", "synthetic-reddit-small", "--users", "400000", "--out", str(out),
         "--cache-dir", str(tmp_path / "cache")], out.parent)
    assert code == 130, stderr
    assert stderr.strip().endswith("fedhh data generate: interrupted"), stderr
    assert list(out.parent.iterdir()) == []


def test_sigterm_while_experiments_build_a_dataset_leaves_nothing_behind(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # dev-reddit-400k: the synthetic-reddit generator at 400,000 users, built into the cache
    # before the first run (seconds of generation: time for the signal to find it at work).
    code, stderr = terminated_while_generating(
        ["experiments", "segmentation", "--dataset", "dev-reddit-400k", "--seeds", "1",
         "--quiet", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out")],
        cache, {"FEDHH_CACHE": str(cache)})
    assert code == 130, stderr
    assert stderr == "fedhh experiments segmentation: interrupted\n"
    # (the build's lock file stays, as after `fedhh data generate`: it holds no data)
    assert [p.name for p in cache.iterdir() if p.suffix != ".lock"] == []
