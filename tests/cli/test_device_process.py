"""`fedhh device` as a supervisor sees it: a process whose devices cannot enroll fails with the
reason (it exited 0, silently), and one still trying an unreachable coordinator stops at
SIGTERM (it spun at 50-80% CPU and ignored SIGTERM and SIGINT)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _closed_port() -> int:
    with socket.socket() as probe:  # a port the OS just handed out, now closed: refused
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _device(tmp_path: Path, *extra: str) -> list[str]:
    data = tmp_path / "users.txt"
    data.write_text("tea coffee\ncoffee\n", encoding="utf-8")
    return [sys.executable, "-m", "fedhh.cli.main", "device", "--coordinator",
            f"127.0.0.1:{_closed_port()}", "--insecure", "--dataset", str(data), "--users",
            "0:2", "--state-dir", str(tmp_path / "state"), *extra]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "FEDHH_CACHE": str(tmp_path / "cache")}


def test_devices_that_cannot_enroll_fail_the_process_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run(_device(tmp_path), capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "fedhh device: error: no enrollment token for user 0")


def test_sigterm_stops_a_process_still_trying_to_enroll(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("0 aaaaaaaaaaaaaaaaaaaa\n1 bbbbbbbbbbbbbbbbbbbb\n", encoding="ascii")
    ready = tmp_path / "started"
    process = subprocess.Popen(_device(tmp_path, "--enrollment-tokens-file", str(tokens)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=_env(tmp_path))
    try:
        assert process.stderr is not None
        for line in process.stderr:  # readiness: its devices are trying to enroll
            if "device process started" in line:
                ready.touch()
                break
        assert ready.exists(), "the device process never started"
        # Not a readiness wait (the test passes whenever the signal comes): a few seconds in,
        # its retries pause for longer, which is when the signal used to be lost.
        time.sleep(3)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
