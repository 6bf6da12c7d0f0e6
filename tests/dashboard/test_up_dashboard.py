"""`fedhh up --dashboard`: prints the dashboard's address once the services are up, serves it
during and after the run, and keeps the stack up until Ctrl-C (SIGINT), then shuts down
cleanly."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from networked_kit import planted_dataset

pytestmark = pytest.mark.slow


def get(url: str, ca: Path, path: str, cookie: str = "",
        form: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    parts = urlsplit(url)
    connection = http.client.HTTPSConnection(
        parts.hostname, parts.port, context=ssl.create_default_context(cafile=str(ca)),
        timeout=30)
    try:
        headers = {"Cookie": cookie} if cookie else {}
        if form is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request("POST" if form is not None else "GET", path,
                           body=urlencode(form) if form is not None else None, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read().decode()
    finally:
        connection.close()


def test_fedhh_up_dashboard_serves_the_run_and_stays_up_until_ctrl_c(tmp_path: Path) -> None:
    data = planted_dataset(tmp_path / "users.txt")
    workdir = tmp_path / "up"
    command = [sys.executable, "-m", "fedhh.cli.main", "up", "--dashboard",
               "--dataset", str(data), "--processes", "1", "--workdir", str(workdir),
               "--eps-agg", "8", "--rounds", "1", "--min-fraction", "1",
               "--selection", "uniform", "--max-bits", "10", "--dim-limit", "1024"]
    # (One round of 2-letter prefixes: the dashboard's pages and the stop are the test, not the
    # run, whose 3 rounds up to 30 bits in 16384 dimensions took most of its 31 s.)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env={"FEDHH_CACHE": str(tmp_path / "cache"),
                                               **_env()},
                               start_new_session=True)  # its services share its group

    def kill_all() -> None:  # the services too: killed alone, `fedhh up` would orphan them
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    watchdog = threading.Timer(600, kill_all)  # a hung run fails the test, never hangs it
    watchdog.start()
    output: list[str] = []
    try:
        assert process.stdout is not None

        def until(needle: str) -> str:
            for line in process.stdout:  # type: ignore[union-attr]
                output.append(line)
                if needle in line:
                    return line
            raise AssertionError(f"{needle!r} never printed:\n{''.join(output)[-3000:]}")

        line = until("dashboard: https://")
        url = re.search(r"https://\S+/", line).group(0)  # type: ignore[union-attr]
        ca = workdir / "tls" / "ca.pem"
        assert str(ca) in line and str(workdir / "admin.token") in line
        status, _, page = get(url, ca, "/login")
        assert status == 200 and "Sign in" in page
        until("press Ctrl-C")
        token = (workdir / "admin.token").read_text().strip()
        status, headers, _ = get(url, ca, "/login", form={"token": token, "next": "/runs/demo"})
        assert status == 303
        cookie = headers["Set-Cookie"].split(";")[0]
        status, _, page = get(url, ca, "/runs/demo", cookie)
        assert status == 200 and "state-done" in page and "Heavy hitters" in page
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
        output.append(rest)
        assert process.returncode == 0, "".join(output)[-3000:]
        assert "shut down cleanly" in rest
    finally:
        watchdog.cancel()
        if process.poll() is None:
            kill_all()
            process.wait()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "FEDHH_CACHE"}
