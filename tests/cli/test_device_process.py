"""`fedhh device` as a supervisor sees it: a process whose devices cannot enroll fails with the
reason (it exited 0, silently), and one still trying an unreachable coordinator stops at
SIGTERM (it spun at 50-80% CPU and ignored SIGTERM and SIGINT)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from networked_kit import refused_port

pytestmark = pytest.mark.slow


def _device(tmp_path: Path, *extra: str, port: int) -> list[str]:
    data = tmp_path / "users.txt"
    data.write_text("tea coffee\ncoffee\n", encoding="utf-8")
    return [sys.executable, "-m", "fedhh.cli.main", "device", "--coordinator",
            f"127.0.0.1:{port}", "--insecure", "--dataset", str(data),
            "--users", "0:2", "--state-dir", str(tmp_path / "state"), *extra]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "FEDHH_CACHE": str(tmp_path / "cache")}


def test_devices_that_cannot_enroll_fail_the_process_with_the_reason(tmp_path: Path) -> None:
    with refused_port() as port:  # (nobody there: the process asks its health first)
        done = subprocess.run(_device(tmp_path, port=port), capture_output=True, text=True,
                              timeout=300, env=_env(tmp_path))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "fedhh device: error: no enrollment token for user 0: it has no identity in "
        f"{tmp_path / 'state'} and --enrollment-tokens-file gives it no token (a device enrolls "
        "once, with a token: `fedhh certs` writes device-tokens.txt, `fedhh admin mint-tokens` "
        "mints more)")


class _Refusing:
    """A coordinator's address that accepts each connection and closes it at once (the calls
    fail UNAVAILABLE and are retried), counting the attempts."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.socket.getsockname()[1])
        self.attempts = 0
        self.tried = threading.Condition()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:  # closed
                return
            connection.close()
            with self.tried:
                self.attempts += 1
                self.tried.notify_all()

    def wait_for(self, attempts: int, bound_s: float) -> bool:
        with self.tried:
            return self.tried.wait_for(lambda: self.attempts >= attempts, bound_s)


def test_sigterm_stops_a_process_still_trying_to_enroll(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"0 {'a' * 64}\n1 {'b' * 64}\n", encoding="ascii")
    coordinator = _Refusing()
    process = subprocess.Popen(
        _device(tmp_path, "--enrollment-tokens-file", str(tokens), port=coordinator.port),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tmp_path))
    try:
        # Readiness: its retries have begun to pause between attempts, which is when the
        # signal used to be lost (the process then spun, deaf to SIGTERM and SIGINT).
        assert coordinator.wait_for(3, 120), "the device process never retried"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        coordinator.socket.close()
