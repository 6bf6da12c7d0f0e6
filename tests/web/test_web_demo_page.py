"""The demo page of `fedhh up --web-devices` (clients/web/demo/demo.ts) in headless Chromium
against a stand-in for `fedhh up`: one HTTP server on 127.0.0.1 that serves the page, its
demo.json and progress.json, takes its status posts, and answers the device's Enroll and
GetTask calls (Connect, binary protobuf) as the test tells it to. What the page must show when
a second tab of it opens (its devices wait for the first tab, which runs them) and while `fedhh
up` is not answering (one note, the devices marked as out of contact), and that the page
server keeps the running tab's states when the waiting tab posts its own. The whole demo with
the real services is test_web_demo.py."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import webkit

from fedhh.cli.webdemo import DemoPage
from fedhh.v1 import coordinator_pb2

REASON = webkit.skip_reason()
USER = 7
PROGRESS = ["round 1 attempt 1: released: 60 contributors"]
DEADLINE_S = 60  # a hung page fails the test, never hangs it


class FakeUp:
    """The page's server and the coordinator's Connect port in one, on a port of the OS's
    choice. ``hold_enroll``: the first Enroll is answered only when the test ends (the tab
    that sent it holds the device's lock meanwhile). ``refuse_enroll``: every Enroll is refused
    as the coordinator refuses a used token, once ``refuse_when`` is set if given. ``down``:
    every request is dropped unanswered, as by a `fedhh up` that is gone; ``dropped`` counts
    the progress polls it dropped. ``posts``: the devices of each status post."""

    def __init__(self, dist: Path, *, hold_enroll: bool = False,
                 refuse_enroll: bool = False,
                 refuse_when: threading.Event | None = None) -> None:
        self.bundle = dist / "browser" / "demo.js"
        self.hold_enroll, self.refuse_enroll = hold_enroll, refuse_enroll
        self.refuse_when = refuse_when
        self.posts: list[list[dict[str, Any]]] = []
        self.changed = threading.Condition()
        self.down = False
        self.ending = False
        self.enrolls = 0
        self.dropped = 0
        self.lines = PROGRESS  # (progress.json's)
        handler = type("Handler", (_FakeHandler,), {"up": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def demo_json(self, host: str | None = None) -> bytes:
        """The page's demo.json; its calls go to ``host`` (the name the page was loaded by:
        the stand-in answers no CORS preflight), by default 127.0.0.1."""
        origin = f"http://{host}" if host else self.origin
        return json.dumps({
            "aggregator": origin, "coordinators": [origin],
            "aggregators": [origin], "tokens": ["token"], "users": [USER],
            "items": [["a"]], "counts": [[1]], "minCohort": 2, "books": "books/",
            "session": "fake"}).encode()

    def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, DEADLINE_S):
                raise AssertionError(f"never happened: {what}")

    def set_down(self, down: bool) -> None:
        with self.changed:
            self.down = down
            self.changed.notify_all()

    def close(self) -> None:
        with self.changed:
            self.ending = True  # releases the held calls
            self.changed.notify_all()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class _FakeHandler(http.server.BaseHTTPRequestHandler):
    up: FakeUp
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _dropped(self) -> bool:
        """Whether `fedhh up` is down: the request is then dropped without an answer."""
        up = self.up
        with up.changed:
            if not up.down:
                return False
            if self.path == "/progress.json":
                up.dropped += 1
                up.changed.notify_all()
        self.close_connection = True
        return True

    def do_GET(self) -> None:  # http.server's name
        if self._dropped():
            return
        web = webkit.WEB / "demo"
        files = {"/": (web / "index.html", "text/html; charset=utf-8"),
                 "/demo.css": (web / "demo.css", "text/css; charset=utf-8"),
                 "/demo.js": (self.up.bundle, "text/javascript; charset=utf-8")}
        if self.path in files:
            path, kind = files[self.path]
            self._send(200, path.read_bytes(), kind)
        elif self.path == "/demo.json":
            self._send(200, self.up.demo_json(self.headers.get("Host")), "application/json")
        elif self.path == "/progress.json":
            self._send(200, json.dumps({"lines": self.up.lines}).encode(), "application/json")
        else:
            self._send(404, b"not found", "text/plain")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._dropped():
            return
        up = self.up
        if self.path == "/status":
            with up.changed:
                up.posts.append(json.loads(body)["devices"])
                up.changed.notify_all()
            self._send(204, b"", "text/plain")
        elif self.path == "/fedhh.v1.DeviceService/Enroll":
            with up.changed:
                up.enrolls += 1
                up.changed.notify_all()
                if up.hold_enroll and up.enrolls == 1:
                    up.changed.wait_for(lambda: up.ending, DEADLINE_S)
                    self.close_connection = True
                    return
            if up.refuse_enroll:  # (Connect's error answer, as the coordinator's port gives it)
                if up.refuse_when is not None and not up.refuse_when.wait(DEADLINE_S):
                    return
                self._send(401, json.dumps({"code": "unauthenticated", "message":
                                            "unknown or already used enrollment token"}).encode(),
                           "application/json")
                return
            answer = coordinator_pb2.EnrollResponse(device_id=41, credential=bytes(32),
                                                    coordinator_public_key=bytes(range(32)))
            self._send(200, answer.SerializeToString(), "application/proto")
        elif self.path == "/fedhh.v1.DeviceService/GetTask":
            # Nothing for the device yet: it checks in again a moment later.
            answer = coordinator_pb2.GetTaskResponse(retry_after_ms=100)
            self._send(200, answer.SerializeToString(), "application/proto")
        else:
            self._send(404, b"not found", "text/plain")


@pytest.fixture(scope="module")
def dist() -> Path:
    if REASON is not None:
        pytest.skip(REASON)
    try:
        return webkit.build()
    except webkit.BuildError as error:
        pytest.fail(str(error))


@contextlib.contextmanager
def fake_up(dist: Path, **options: Any) -> Iterator[FakeUp]:
    up = FakeUp(dist, **options)
    try:
        yield up
    finally:
        up.close()


def device(browser: Any) -> dict[str, Any] | None:
    """The page's one device as it shows it (window.fedhhDemo), once the page has started."""
    state = browser.execute_script("return window.fedhhDemo || null")
    devices = (state or {}).get("devices") or []
    return devices[0] if devices else None


def row_text(browser: Any) -> str:
    # Read in one script: each render replaces the rows, so a held element goes stale.
    return str(browser.execute_script(
        "return Array.from(document.querySelectorAll('#devices tbody td'),"
        " (td) => td.textContent).join(' | ')"))


def progress(browser: Any) -> str:
    return str(browser.execute_script("return document.getElementById('progress').textContent"))


def until(browser: Any, condition: Callable[[Any], Any], what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, DEADLINE_S, poll_frequency=0.1).until(condition)
    except TimeoutException:
        raise AssertionError(f"never happened: {what}; the row reads {row_text(browser)!r}, "
                             f"the device {device(browser)!r}") from None


@pytest.mark.browser
def test_a_second_tab_says_its_devices_wait_for_the_first(dist: Path) -> None:
    with fake_up(dist, hold_enroll=True) as up, webkit.chromium() as browser:
        browser.get(up.origin + "/")
        first = browser.current_window_handle
        # The first tab enrols the device (its Enroll held): it holds the device's lock.
        up.wait_for(lambda: up.enrolls == 1, "the first tab's Enroll")
        browser.switch_to.new_window("tab")
        browser.get(up.origin + "/")
        second = browser.current_window_handle
        until(browser, lambda b: (d := device(b)) and d["state"] == "waiting for another tab",
              "the second tab's device waits")
        until(browser, lambda b: "another tab of this page runs this device; it goes on here "
              "once that tab is closed" in row_text(b), "the row says why it waits")
        assert "waiting for another tab" in row_text(browser)
        assert up.enrolls == 1, "the second tab must not enrol the device again"

        # The first tab closed: the second runs the device from then on.
        browser.switch_to.window(first)
        browser.close()
        browser.switch_to.window(second)
        until(browser, lambda b: (d := device(b)) and d["state"] == "checking in"
              and d["deviceId"] == "41", "the second tab runs the device")
        assert "another tab" not in row_text(browser)
        assert up.enrolls == 2


@pytest.mark.browser
def test_a_page_that_goes_sends_the_states_it_had_not_posted_yet(dist: Path) -> None:
    """The page posts its devices' states 300 ms after a change; a page reloaded or closed
    within them sends them as it goes (before, they were lost, and `fedhh up`'s summary lacked
    the round a device had just ended)."""
    refuse = threading.Event()
    with fake_up(dist, refuse_enroll=True, refuse_when=refuse) as up, \
            webkit.chromium() as browser:
        browser.get(up.origin + "/")
        up.wait_for(lambda: up.enrolls == 1 and any(up.posts), "the enrolling device posted")
        refuse.set()
        # The page leaves within a few ms of the device's failure, well inside the 300 ms.
        left = browser.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const failed = () => window.fedhhDemo?.devices?.[0]?.state === "failed";
            const leave = () => { done(true); setTimeout(() => location.replace("about:blank")); };
            const poll = () => failed() ? leave() : setTimeout(poll, 2);
            poll();""")
        assert left is True
        up.wait_for(lambda: any(d and d[0]["state"] == "failed" for d in up.posts),
                    "the failed device's state posted as the page went")
        failed = next(d[0] for d in up.posts if d and d[0]["state"] == "failed")
        assert "unknown or already used enrollment token" in failed["error"], failed


@pytest.mark.browser
def test_while_fedhh_up_is_not_answering_the_page_says_so_once(dist: Path) -> None:
    with fake_up(dist) as up, webkit.chromium() as browser:
        browser.get(up.origin + "/")
        until(browser, lambda b: (d := device(b)) and d["state"] == "checking in",
              "the device checks in")
        until(browser, lambda b: progress(b) == PROGRESS[0], "the progress is shown")

        up.set_down(True)
        until(browser, lambda b: (d := device(b)) and d["state"] == "no contact",
              "the device is marked as out of contact")
        until(browser, lambda b: "no answer since" in row_text(b), "the row says since when")
        # Three polls dropped, two of them after the first had put the note up.
        up.wait_for(lambda: up.dropped >= 3, "three progress polls")
        until(browser, lambda b: "not answering" in progress(b), "the note")
        text = progress(browser)
        assert text.count("fedhh up is not answering") == 1, text
        assert text.startswith(PROGRESS[0]), text

        up.set_down(False)
        until(browser, lambda b: progress(b) == PROGRESS[0], "the note is taken down")
        until(browser, lambda b: (d := device(b)) and d["state"] == "checking in"
              and d["note"] == "", "the device is in contact again")
        assert "no answer" not in row_text(browser)


@pytest.mark.browser
def test_a_browser_offline_is_told_as_such_and_goes_on_once_online(dist: Path) -> None:
    """DevTools' offline network (a laptop off its Wi-Fi): the row and the progress say that
    the browser is offline, not that fedhh up stopped answering (before, the progress said
    'fedhh up is not answering'); back online, the device checks in again."""
    conditions = {"latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
    with fake_up(dist) as up, webkit.chromium() as browser:
        browser.get(up.origin + "/")
        until(browser, lambda b: "checking in" in row_text(b), "the row shows the check-in")
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.emulateNetworkConditions",
                                {"offline": True, **conditions})
        until(browser, lambda b: "this browser is offline" in row_text(b), "the row says so")
        # Its check-ins wait for the browser to be online again, and the row says so (before,
        # "no contact", asking every few seconds, and a device back online waited out its
        # backoff: test/offline_check_in.test.ts).
        until(browser, lambda b: (d := device(b)) and d["state"] == "offline",
              "the device waits for the network")
        until(browser, lambda b: "checks in again as soon as it is back online" in row_text(b),
              "the row says what it waits for")
        until(browser, lambda b: "(this browser is offline since" in progress(b),
              "the progress says so")
        assert "not answering" not in progress(browser)
        browser.execute_cdp_cmd("Network.emulateNetworkConditions",
                                {"offline": False, **conditions})
        until(browser, lambda b: (d := device(b)) and d["state"] == "checking in"
              and d["note"] == "", "the device is in contact again")
        until(browser, lambda b: progress(b) == PROGRESS[0], "the note is taken down")


@pytest.mark.browser
def test_a_reloaded_page_counts_the_rounds_its_earlier_loads_showed(dist: Path) -> None:
    """The page keeps each device's rounds in localStorage, under the device's name and id
    (clients/web/demo/kept.ts), and a load starts from them: a load of the page before this
    one contributed to round 1. Before, a reloaded page counted its own rounds alone (0)."""
    earlier = {"deviceId": "41", "current": None, "tasks": [
        {"task": "demo round 1.1", "query": "4 prefixes of 0 bits", "outcome": "completed",
         "contributed": True, "detail": ""}]}
    with fake_up(dist) as up, webkit.chromium() as browser:
        browser.get(up.origin + "/not-the-page")  # (the origin, before the page runs)
        browser.execute_script("localStorage.setItem('fedhh-demo-rounds/fake/0', "
                               "JSON.stringify(arguments[0]))", earlier)
        browser.get(up.origin + "/")
        until(browser, lambda b: (d := device(b)) and d["deviceId"] == "41"
              and d["state"] == "checking in", "the device enrolled and checks in")
        cells = until(browser, lambda b: (c := row_text(b).split(" | "))[7] == "1" and c,
                      "the round of the earlier load is counted")
        assert cells[6] == "demo round 1.1: contributed", cells
        assert cells[5] == "4 prefixes of 0 bits", cells
        kept = browser.execute_script("return localStorage.getItem('fedhh-demo-rounds/fake/0')")
        assert json.loads(kept) == earlier
        # What the page posts is this load's alone: `fedhh up` keeps each load's itself.
        up.wait_for(lambda: any(d and d[0].get("deviceId") == "41" for d in up.posts),
                    "the enrolled device posted")
        posted = [d[0] for d in up.posts if d]
        assert all(d["tasks"] == [] and "earlier" not in d for d in posted), posted


@pytest.mark.browser
def test_a_screen_reader_finds_the_devices_and_the_run_by_name(dist: Path) -> None:
    """Chromium's accessibility tree (what a screen reader reads): the devices' table and the
    run's progress are named, so a user who lists the page's tables or landmarks finds them.
    Before, the table was 'table' without a name and the progress no landmark at all."""
    with fake_up(dist) as up, webkit.chromium() as browser:
        browser.get(up.origin + "/")
        until(browser, lambda b: "checking in" in row_text(b), "the row shows the check-in")
        browser.execute_cdp_cmd("Accessibility.enable", {})
        nodes = browser.execute_cdp_cmd("Accessibility.getFullAXTree", {})["nodes"]
        named = {(n.get("role", {}).get("value"), n.get("name", {}).get("value"))
                 for n in nodes if not n.get("ignored")}
        assert ("table", "The devices of this tab") in named, sorted(map(str, named))
        assert ("region", "The run") in named, sorted(map(str, named))


@pytest.mark.browser
def test_a_page_frozen_and_resumed_shows_its_devices_as_they_are(dist: Path) -> None:
    """A tab frozen in the background (Chromium freezes such tabs; a laptop asleep) and resumed
    draws no frames in headless Chromium: before, its rows were drawn at a frame only, and
    showed the state the devices had when it froze for good (a round's stage, 0 rounds) while
    the devices went on and posted their new states."""
    with fake_up(dist) as up, webkit.chromium() as browser:
        browser.get(up.origin + "/")
        until(browser, lambda b: "checking in" in row_text(b), "the row shows the check-in")
        browser.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "frozen"})
        up.set_down(True)  # (its check-ins go unanswered once it runs again)
        browser.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "active"})
        until(browser, lambda b: (d := device(b)) and d["state"] == "no contact",
              "the device is marked as out of contact")
        until(browser, lambda b: "no answer since" in row_text(b), "the row says so")


@pytest.mark.browser
def test_a_long_item_in_the_progress_wraps_inside_the_page(dist: Path) -> None:
    """The run's end lists its heavy hitters on one line, each item whole (it is not a table:
    nothing to keep in line, so nothing cut). A 2,000-character URL has no space to wrap at:
    before, it ran on past the progress box and the page, which scrolled sideways 2,000
    characters wide."""
    line = 'run demo: done; heavy hitters: ["http://x.io/' + "q" * 2000 + '", "ab"]'
    with fake_up(dist) as up, webkit.chromium() as browser:
        up.lines = [line]
        browser.get(up.origin + "/")
        until(browser, lambda b: progress(b) == line, "the progress is shown")
        box, page, view = browser.execute_script(
            "const box = document.getElementById('progress');"
            "return [box.scrollWidth <= box.clientWidth,"
            " document.documentElement.scrollWidth, window.innerWidth]")
        assert box and page <= view, (page, view)


@pytest.mark.browser
def test_on_a_phone_the_page_does_not_scroll_sideways_and_names_each_field(dist: Path) -> None:
    """A phone's screen (375 CSS pixels, as DevTools' iPhone SE and others): each device is a
    card of its fields, each named. Before, the table's nine columns were wider than the
    screen, and the whole page, the run's progress with it, scrolled sideways."""
    with fake_up(dist) as up, webkit.chromium() as browser:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 375, "height": 740, "deviceScaleFactor": 2, "mobile": True})
        browser.get(up.origin + "/")
        until(browser, lambda b: "checking in" in row_text(b), "the row shows the check-in")
        page, view, heads, labels = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth,"
            " getComputedStyle(document.querySelector('#devices thead')).display,"
            " Array.from(document.querySelectorAll('#devices tbody td'),"
            "  (td) => getComputedStyle(td, '::before').content === 'none' ? '' :"
            "   td.dataset.label)]")
        assert page <= view == 375, (page, view)
        assert heads == "none"
        assert labels == ["user", "device id", "enrolled", "state", "round and stage",
                          "its query", "last round", "rounds contributed", "local ε spent"]


@pytest.mark.browser
def test_a_page_at_another_address_than_the_one_that_enrolled_says_to_open_that_one(
        dist: Path) -> None:
    # A browser keeps each origin's data apart: the demo opened at localhost after 127.0.0.1
    # enrolled its devices holds no identity, and the coordinator refuses the spent token.
    # Before, the page asked for a new token only, as if the site's data had been cleared.
    with fake_up(dist, refuse_enroll=True) as up, webkit.chromium() as browser:
        page = up.origin.replace("127.0.0.1", "localhost")
        browser.get(page + "/")
        state = until(browser, lambda b: (d := device(b)) and d["state"] == "failed" and d,
                      "the device's enrolment is refused")
        assert f"holds no identity for that device at {page}:" in state["error"], state
        assert ("if the page enrolled it at another address (another host name, port or "
                "scheme: a browser keeps each one's data apart), open the page there instead"
                in state["error"]), state
        until(browser, lambda b: "open the page there instead" in row_text(b), "the row says so")
        assert up.enrolls == 1


def post(port: int, devices: list[dict[str, Any]]) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/status", body=json.dumps({"devices": devices}),
                           headers={"Content-Type": "application/json"})
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_page_server_keeps_what_the_tab_that_runs_a_device_posted(tmp_path: Path) -> None:
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")
    running = {"user": 8, "deviceId": "3", "state": "checking in", "tasks": [], "spent": 0.5}
    waiting = {"user": 8, "deviceId": "", "state": "waiting for another tab", "tasks": [],
               "spent": 0}
    other = {"user": 9, "deviceId": "", "state": "waiting for another tab", "tasks": [],
             "spent": 0}
    with DemoPage(tmp_path, None) as page:
        assert post(page.port, [running]) == 204
        # A second tab posts the device it waits for, and one nobody posted before.
        assert post(page.port, [waiting, other]) == 204
        assert page.devices() == [running, other]
        assert page.wait_enrolled(1, 0.05) == 1
        # Once the second tab runs the device, its states are the device's.
        taken = {**running, "state": "enrolled"}
        assert post(page.port, [taken]) == 204
        assert page.devices() == [taken]
