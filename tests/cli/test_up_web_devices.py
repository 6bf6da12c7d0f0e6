"""`fedhh up --web-devices`'s pieces in process, without a browser: the choice of the browser
devices' users, the refusals (one line, before any work), and the demo page's server (routes,
the devices' posted states, the wait for their enrolment). The whole of it, with Chromium, is
tests/web/test_web_demo.py."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_kit import one_line_error

from fedhh.cli import webclient
from fedhh.cli.webdemo import (
    EARLIER_TASK_BYTES,
    MAX_WEB_DEVICES,
    DemoPage,
    choose_users,
    device_urls,
    summary,
)
from fedhh.errors import ConfigError


def test_the_browser_devices_are_the_last_users_holding_an_item() -> None:
    held = [True, False, True, True, False, True, False]
    assert choose_users(held, 2) == ([3, 5], 3)  # the Python devices take users 0..2
    assert choose_users(held, 0) == ([], 7)
    with pytest.raises(ConfigError, match="--web-devices 5: only 4 users hold an item"):
        choose_users(held, 5)


def test_device_urls_take_the_host_names_in_turn() -> None:
    assert device_urls("https", 7080, 3) == ["https://127.0.0.1:7080", "https://localhost:7080",
                                             "https://127.0.0.1:7080"]


def test_up_refuses_more_browser_devices_than_a_tab_can_hold(
        capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["up", "--web-devices", str(MAX_WEB_DEVICES + 1)], capsys)
    assert f"at most {MAX_WEB_DEVICES} browser devices" in line and "6 connections" in line


def test_up_refuses_browser_devices_that_leave_too_few_python_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "five.txt"
    data.write_text("apple\nbanana\ncherry\ndamson\nelder\n")
    line = one_line_error(["up", "--dataset", str(data), "--web-devices", "3", "--workdir",
                           str(tmp_path / "w")], capsys)
    assert "--web-devices 3: 2 of its users hold an item beside the browser devices" in line
    assert not (tmp_path / "w").exists()


def test_without_node_the_build_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webclient.shutil, "which", lambda name: None)
    with pytest.raises(webclient.BuildError, match="node and npm are not installed"):
        webclient.build()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[DemoPage]:
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")
    with DemoPage(tmp_path, None) as served:
        yield served


def request(page: DemoPage, method: str, path: str, body: bytes | None = None
            ) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=10)
    try:
        connection.request(method, path, body=body,
                           headers={"Content-Type": "application/json"} if body else {})
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        connection.close()


def test_the_page_server_serves_the_page_its_devices_and_the_progress(page: DemoPage) -> None:
    assert page.url == f"http://127.0.0.1:{page.port}/"
    assert page.origins() == [f"http://127.0.0.1:{page.port}", f"http://localhost:{page.port}"]
    status, _, body = request(page, "GET", "/")
    assert status == 200 and b'src="demo.js"' in body
    assert request(page, "GET", "/demo.js")[2] == b"// the bundle"
    assert request(page, "GET", "/demo.json")[0] == 404  # not before configure()
    page.configure(tokens=["t1", "t2"], users=[8, 9], items=[["a"], ["b", "c"]],
                   counts=[[1], [2, 1]], coordinator_port=7080, aggregator_port=7180,
                   min_cohort=50)
    status, headers, body = request(page, "GET", "/demo.json")
    config = json.loads(body)
    assert status == 200 and config["tokens"] == ["t1", "t2"] and config["minCohort"] == 50
    assert config["coordinators"] == ["http://127.0.0.1:7080", "http://localhost:7080"]
    assert config["aggregator"] == "http://127.0.0.1:7180"
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "http://localhost:7180" in csp
    assert headers["Cache-Control"] == "no-store"
    page.say("round 1 attempt 1: check-in")
    assert json.loads(request(page, "GET", "/progress.json")[2]) == {
        "lines": ["round 1 attempt 1: check-in"], "released": []}
    assert request(page, "GET", "/books/english.json")[0] == 200
    for path in ("/books/../up.py", "/books/nothing.json", "/fleet.json", "/../README.md"):
        assert request(page, "GET", path)[0] == 404, path


def test_the_page_server_waits_for_the_devices_to_enrol(page: DemoPage) -> None:
    assert page.wait_enrolled(2, 0.05) == 0  # nobody opened the page
    posted = threading.Event()

    def post() -> None:
        devices = [{"user": 8, "deviceId": "3", "state": "checking in", "tasks": [],
                    "spent": 0}, {"user": 9, "deviceId": "4", "state": "enrolled",
                                  "tasks": [], "spent": 0}]
        assert request(page, "POST", "/status", json.dumps({"devices": devices}).encode()
                       )[0] == 204
        posted.set()

    thread = threading.Thread(target=post)
    thread.start()
    assert page.wait_enrolled(2, 30) == 2
    thread.join()
    assert posted.is_set() and page.wait_settled(0.05)
    assert summary(page.devices())[0] == "user 8 (device 3, local eps spent 0.000): no round yet"
    assert request(page, "POST", "/status", b"{not json")[0] == 400
    assert request(page, "POST", "/status", b'{"devices": 3}')[0] == 400
    with socket.create_connection(("127.0.0.1", page.port), timeout=10) as raw:
        # A declared body over the cap is answered unread.
        raw.sendall(f"POST /status HTTP/1.1\r\nHost: 127.0.0.1:{page.port}\r\n"
                    "Content-Length: 1000000000\r\n\r\n".encode())
        assert raw.recv(64).startswith(b"HTTP/1.1 413 ")
    assert request(page, "POST", "/elsewhere", b"{}")[0] == 404
    assert len(page.devices()) == 2  # the refused posts changed nothing


def test_the_dashboard_links_to_the_demo_page(capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh_coordinator.dashboard import pages

    assert 'href="https://127.0.0.1:5/"' in pages.runs_page([], "https://127.0.0.1:5/")
    assert "demo page" not in pages.runs_page([])
    line = one_line_error(["coordinator", "--demo-url", "javascript:alert(1)"], capsys)
    assert "--demo-url" in line and "expected an http(s):// URL" in line


def test_the_terminal_names_an_attempt_that_aborted_after_a_device_contributed() -> None:
    """As the page does (demo.ts outcomeText): before, 'demo round 2.1: contributed' for an
    attempt that released nothing, its outcome round_aborted left out."""
    tasks = [{"task": "demo round 2.1", "outcome": "round_aborted", "contributed": True,
              "detail": ""},
             {"task": "demo round 2.2", "outcome": "completed", "contributed": True,
              "detail": ""},
             {"task": "demo round 3.1", "outcome": "late", "contributed": False,
              "detail": "the stage closed"}]
    line = summary([{"user": 8, "deviceId": "3", "tasks": tasks, "spent": 1.5}])
    assert line == ["user 8 (device 3, local eps spent 1.500): demo round 2.1: contributed "
                    "(round_aborted), demo round 2.2: contributed, demo round 3.1: late (the "
                    "stage closed)"]


def test_the_terminal_keeps_the_rounds_a_device_reported_before_the_page_was_reloaded(
        page: DemoPage) -> None:
    """A reload (or a second tab taking over) starts the page's list of a device's tasks
    afresh; the rounds reported before it stand in `fedhh up`'s summary. Before, a device that
    contributed to round 1 and was reloaded while it held round 2's task read 'demo round
    2.1: device_aborted' alone (probed with Chromium and `fedhh up --web-devices 3`)."""
    def task(name: str, outcome: str, contributed: bool, detail: str = "") -> dict[str, Any]:
        return {"task": name, "outcome": outcome, "contributed": contributed, "detail": detail}

    def post(state: str, *tasks: dict[str, Any], device_id: str = "3") -> None:
        device = {"user": 8, "deviceId": device_id, "state": state, "tasks": list(tasks),
                  "spent": 1.5}
        assert request(page, "POST", "/status",
                       json.dumps({"devices": [device]}).encode())[0] == 204

    first = task("demo round 1.1", "completed", True)
    aborted = task("demo round 2.1", "device_aborted", False, "taken before the reload")
    post("checking in", first)
    post("in a round", first)  # the same load, posted again: nothing doubled
    post("enrolling", device_id="")  # reloaded
    post("waiting for another tab")  # a second tab: the running tab's post stands
    post("checking in")
    post("checking in", aborted)
    post("checking in", aborted, task("demo round 3.1", "completed", True))
    assert summary(page.devices()) == [
        "user 8 (device 3, local eps spent 1.500): demo round 1.1: contributed, demo round "
        "2.1: device_aborted (taken before the reload), demo round 3.1: contributed"]
    post("checking in")  # reloaded again: both loads' rounds stand
    assert [t["task"] for t in page.devices()[0]["tasks"]] == [
        "demo round 1.1", "demo round 2.1", "demo round 3.1"]


def test_a_page_in_another_browser_profile_does_not_replace_the_running_devices(
        page: DemoPage) -> None:
    """The page opened in a second browser profile (or browser) while the first runs its
    devices: the second holds no identity, its enrolments are refused (the tokens are spent)
    and it posts its devices as failed, unenrolled. What the running load posted stands, and
    its rounds are counted once. Before, the second profile's post replaced the running
    devices (`wait_enrolled` and the summary read them as failed) and, the running load's next
    post taken for a new load, every round it had reported was listed twice."""
    def task(name: str, outcome: str = "completed") -> dict[str, Any]:
        return {"task": name, "outcome": outcome, "contributed": True, "detail": ""}

    def post(load: str, device: dict[str, Any]) -> None:
        assert request(page, "POST", "/status", json.dumps(
            {"load": load, "devices": [{"user": 8, "spent": 1.5, **device}]}).encode())[0] == 204

    running = {"deviceId": "3", "state": "in a round", "task": "demo round 2.1",
               "stage": "unmask", "sent": True}
    post("first", {**running, "tasks": [task("demo round 1.1")]})
    post("other-profile", {"deviceId": "", "state": "enrolling", "tasks": []})
    post("other-profile", {"deviceId": "", "state": "failed", "tasks": [],
                           "error": "ConnectError: unknown or already used enrollment token"})
    assert page.devices()[0]["deviceId"] == "3" and not page.devices()[0].get("error")
    assert page.wait_enrolled(1, 0) == 1
    post("first", {**running, "state": "checking in",
                   "tasks": [task("demo round 1.1"), task("demo round 2.1")]})
    assert summary(page.devices()) == [
        "user 8 (device 3, local eps spent 1.500): demo round 1.1: contributed, demo round "
        "2.1: contributed"]
    # A reload in the first profile is the same device: its rounds start afresh after the
    # earlier load's, as before.
    post("reload", {"deviceId": "", "state": "enrolling", "tasks": []})
    post("reload", {"deviceId": "3", "state": "checking in", "tasks": [task("demo round 3.1")]})
    assert [t["task"] for t in page.devices()[0]["tasks"]] == [
        "demo round 1.1", "demo round 2.1", "demo round 3.1"]


def test_the_rounds_kept_from_earlier_loads_are_capped(page: DemoPage) -> None:
    """A poster that is not the page cannot grow them without bound: each device keeps the
    newest within EARLIER_TASK_BYTES of JSON."""
    for load in range(40):
        tasks = [{"task": f"round {load}", "outcome": "late", "contributed": False,
                  "detail": "x" * 10_000}]
        device = {"user": 8, "deviceId": "3", "state": "checking in", "tasks": tasks,
                  "spent": 0}
        assert request(page, "POST", "/status", json.dumps({"devices": [device]}).encode()
                       )[0] == 204
    kept = page.devices()[0]["tasks"]
    assert len(json.dumps(kept[:-1])) <= EARLIER_TASK_BYTES
    assert [t["task"] for t in kept][-3:] == ["round 37", "round 38", "round 39"]


def test_a_poster_naming_new_users_in_each_post_does_not_grow_the_page(page: DemoPage
                                                                        ) -> None:
    """Only the users posted last (MAX_WEB_DEVICES of them, as many as a page runs) keep their
    tasks: before, each post naming users of its own was kept whole (~250 kB a post here)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for post in range(100):
            devices = [{"user": f"u{post}-{i}", "state": "checking in", "tasks": [
                {"task": "round 1", "outcome": "late", "detail": "x" * 24_000}]}
                for i in range(MAX_WEB_DEVICES)]
            assert request(page, "POST", "/status",
                           json.dumps({"devices": devices}).encode())[0] == 204
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert [d["user"] for d in page.devices()] == [f"u99-{i}" for i in range(MAX_WEB_DEVICES)]
    assert grown < 8_000_000, grown  # (24.9 MB before: every post kept)
