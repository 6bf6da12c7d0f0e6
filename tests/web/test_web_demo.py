"""`fedhh up --web-devices 3`: the demo page's browser devices take part in the run.

`fedhh up` starts the services, 57 Python devices and the demo page, and prints the page's
address; the test opens it in headless Chromium (and a second tab of it, whose devices wait for
the first tab's). The page's three devices (the dataset's users
57-59, each with its own token, identity and IndexedDB budget) enrol, so `fedhh up` starts the
run with them in its target; every round is then released over all 60 devices (the coordinator
counts the browser devices among the contributors), the page shows each browser device as
having contributed, and `fedhh up` reports them. Reloaded, the page goes on with the same
devices and budgets. The dashboard's runs page links to the demo page. Ctrl-C (SIGINT) then
stops everything cleanly.
"""

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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlencode, urlsplit

import pytest
import webkit
from networked_kit import short_dataset

REASON = webkit.skip_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
DEVICES = 60  # the dataset's first 60 users: 57 Python devices, then 3 in the browser
WEB_DEVICES = 3
ROUND_LINE = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\d+)\s")


class Output:
    """`fedhh up`'s stdout, read line by line up to a line that is expected."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.lines: list[str] = []

    def until(self, needle: str) -> str:
        for line in self.stream:
            self.lines.append(line)
            if needle in line:
                return line
        raise AssertionError(f"{needle!r} never printed:\n{self.text()[-4000:]}")

    def text(self) -> str:
        return "".join(self.lines)


@contextlib.contextmanager
def fedhh_up(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen([sys.executable, "-m", "fedhh.cli.main", "up", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env, start_new_session=True)  # its services share its group

    def kill_all() -> None:  # the services too: killed alone, `fedhh up` would orphan them
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    watchdog = threading.Timer(600, kill_all)  # a hung run fails the test, never hangs it
    watchdog.start()
    try:
        yield process
    finally:
        watchdog.cancel()
        if process.poll() is None:
            kill_all()
            process.wait()


def dashboard_runs_page(url: str, ca: Path, token: str) -> str:
    """The dashboard's runs page, signed in with the admin token."""
    parts = urlsplit(url)
    context = ssl.create_default_context(cafile=str(ca))

    def call(method: str, path: str, body: str | None = None,
             headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        connection = http.client.HTTPSConnection(parts.hostname or "", parts.port, context=context,
                                                 timeout=30)
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        response.read()  # keeps the body on the object
        connection.close()
        return response

    signed_in = call("POST", "/login", urlencode({"token": token, "next": "/"}),
                     {"Content-Type": "application/x-www-form-urlencoded"})
    assert signed_in.status == 303, signed_in.status
    cookie = (signed_in.headers["Set-Cookie"] or "").split(";")[0]
    connection = http.client.HTTPSConnection(parts.hostname or "", parts.port, context=context,
                                             timeout=30)
    try:
        connection.request("GET", "/", headers={"Cookie": cookie})
        response = connection.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        connection.close()


def shown(browser: Any, done: Callable[[list[str], str], bool]) -> tuple[list[str], str]:
    """The text of the page's device rows and of its progress once ``done`` holds of them (or
    as they are after a minute): the page draws its table at the animation frame after its
    devices' state changes, and reads `fedhh up`'s progress once a second, so either may lag
    the state the test has just seen."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    def read(driver: Any) -> tuple[list[str], str]:
        # (in one script: the table is drawn anew on each change, so elements found one
        # call earlier may be gone)
        rows, progress = driver.execute_script(
            "return [[...document.querySelectorAll('#devices tbody tr')].map(r => r.innerText),"
            " document.getElementById('progress').innerText];")
        return list(rows), str(progress)

    with contextlib.suppress(TimeoutException):
        WebDriverWait(browser, 60, poll_frequency=0.2).until(lambda d: done(*read(d)))
    return read(browser)


def test_fedhh_up_web_devices_take_part_in_the_released_rounds(tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        webkit.build()  # here, so that a failure says so (fedhh up then finds it built)
    except webkit.BuildError as error:
        pytest.fail(str(error))
    data = short_dataset(tmp_path / "users.txt")
    workdir = tmp_path / "up"
    env = {**{k: v for k, v in os.environ.items() if k != "FEDHH_CACHE"},
           "FEDHH_CACHE": str(tmp_path / "cache")}
    args = ["--web-devices", str(WEB_DEVICES), "--web-wait", "120", "--dashboard",
            "--dataset", str(data), "--devices", str(DEVICES), "--processes", "1",
            "--workdir", str(workdir), "--eps-agg", "8", "--rounds", "2", "--max-bits", "10",
            "--dim-limit", "128", "--selection", "uniform", "--min-fraction", "0.9",
            # One completion round, not the default 32: the coordinator budgets a run by
            # finding how many of its completion rounds 54 devices can afford at eps_agg 8
            # (31 of 32: ~20 s of solving at load 15 before the run started); the tree's
            # rounds and the one completion round run all the same.
            "--completion-rounds", "1"]
    with fedhh_up(args, env) as process, \
            webkit.chromium("--ignore-certificate-errors") as browser:
        assert process.stdout is not None
        out = Output(process.stdout)
        dashboard = re.search(r"https://\S+/", out.until("dashboard: https://"))
        line = out.until("demo page (")
        assert "users 57, 58, 59" in line, line
        page = re.search(r"https://127\.0\.0\.1:\d+/", line)
        assert page is not None and dashboard is not None, line
        browser.get(page.group(0))
        out.until(f"browser devices: {WEB_DEVICES} of {WEB_DEVICES} enrolled")
        # A second tab of the page opened while the first runs the rounds: the same devices
        # (identities and budgets in the same IndexedDB) wait for the first tab's locks, so
        # none contributes twice (every round below is released over exactly 60).
        first = browser.current_window_handle
        browser.switch_to.new_window("tab")
        browser.get(page.group(0))

        def waiting(driver: Any) -> list[dict[str, Any]] | None:
            state = driver.execute_script("return window.fedhhDemo || null")
            devices = (state or {}).get("devices") or []
            return devices if len(devices) == WEB_DEVICES and all(
                d["state"] == "waiting for another tab" for d in devices) else None

        WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(waiting)
        out.until("press Ctrl-C")  # the run is over; the stack stays up
        second = waiting(browser)
        assert second is not None and not any(d["tasks"] for d in second), second
        # (closed before the first tab is read: a tab behind another draws no frames)
        browser.close()
        browser.switch_to.window(first)
        output = out.text()

        # The page: each browser device enrolled and contributed to a round of the run.
        def contributed(driver: Any) -> list[dict[str, Any]] | None:
            state = driver.execute_script("return window.fedhhDemo || null")
            devices = (state or {}).get("devices") or []
            done = [d for d in devices if any(t["contributed"] for t in d["tasks"])]
            return devices if len(done) == WEB_DEVICES else None

        devices = WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(contributed)
        assert devices is not None
        assert [d["user"] for d in devices] == [57, 58, 59]
        assert all(d["deviceId"] and d["spent"] > 0 and not d["error"] for d in devices), devices
        # Each round's query as the device got it: what it reported on, what it sent, at what ε.
        query = re.compile(r"^\d+ prefix(es)? of \d+ bits, segment \d+ bits?; "
                           r"report [\d,]+ bytes at local ε [\d.e-]+$")
        assert all(query.match(t["query"]) for d in devices for t in d["tasks"]), devices
        rows, progress = shown(browser, lambda rows, progress: len(rows) == WEB_DEVICES and all(
            "contributed" in row for row in rows) and "released: 60 contributors" in progress)
        assert len(rows) == WEB_DEVICES
        assert all("contributed" in row for row in rows), rows
        assert all(re.search(r"report [\d,]+ bytes at local ε", row) for row in rows), rows
        assert "released: 60 contributors" in progress, progress

        # Reloaded, the page goes on with the same devices (their identities and budgets in
        # IndexedDB, runDevice): no token is needed again.
        browser.refresh()

        def resumed(driver: Any) -> list[dict[str, Any]] | None:
            state = driver.execute_script("return window.fedhhDemo || null")
            again = (state or {}).get("devices") or []
            ready = [d for d in again if d["state"] == "checking in" or d["error"]]
            return again if len(ready) == WEB_DEVICES else None

        again = WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(resumed)
        assert again is not None
        assert [(d["deviceId"], d["error"], d["spent"]) for d in again] == \
            [(d["deviceId"], "", d["spent"]) for d in devices], again

        # The coordinator counted them: every round released over 57 + 3 contributors.
        assert "run demo: done" in output, output[-4000:]
        rounds = [m.groups() for m in map(ROUND_LINE.match, output.splitlines()) if m]
        assert rounds and all(state == "released" and int(n) == DEVICES
                              for _, _, state, n in rounds), rounds
        for device in devices:
            released = [t for t in device["tasks"] if t["task"].startswith("demo ")]
            assert len(released) == len(rounds) and all(t["contributed"] for t in released), \
                device
        assert output.count("contributed") >= WEB_DEVICES  # fedhh up's summary of them

        # The dashboard links to the page.
        token = (workdir / "admin.token").read_text().strip()
        runs = dashboard_runs_page(dashboard.group(0), workdir / "tls" / "ca.pem", token)
        assert f'href="{page.group(0)}"' in runs, runs

        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    assert process.returncode == 0, (output + rest)[-4000:]
    assert "shut down cleanly" in rest
