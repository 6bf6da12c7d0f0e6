"""The browser devices' demo page of ``fedhh up --web-devices N``: a small page server started by
``fedhh up`` in its own process, on 127.0.0.1 at a port of the OS's choice, over HTTPS with the
services' development certificate (plaintext with ``--insecure``).

It serves the static page (``clients/web/demo/``: index.html, demo.css; ``demo.js``, the esbuild
bundle of demo.ts over the web device library), ``demo.json`` (what each browser device gets:
its one-time enrolment token, its user's items, the Connect URLs under its host name, the n_min
floor), the trained codebooks (``books/``), and ``progress.json`` (the run's progress as `fedhh
up` narrates it). The page posts its devices' states to ``status``; `fedhh up` reads them to
wait for the devices' enrolment before it starts the run and to report on them.

A browser opens at most 6 HTTP/1.1 connections per host and port, and each device's long-polls
(GetTask, AwaitStage) hold one, so the devices reach the Connect ports under the two names the
development certificate covers (127.0.0.1 and localhost), at most 5 per name.

The page's enrolment tokens are served to whoever reaches the page's port on this machine: a
demo on loopback, not a deployment (docs/web-devices.md, "Demo page").
"""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import os
import secrets
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from fedhh.cli.webclient import ROOT, WEB
from fedhh.codec.shown import message_text
from fedhh.errors import ConfigError

HOSTS = ("127.0.0.1", "localhost")  # the names the development certificate covers
PER_HOST = 5  # a browser's 6 connections per host and port, one to spare
MAX_WEB_DEVICES = PER_HOST * len(HOSTS)
MAX_STATUS_BYTES = 256 * 1024
# A request arrives whole within this (the head deadline of the services' listeners,
# fedhh.rpc.http_listener, which the command line does not import at its top).
HEAD_TIMEOUT_S = 10.0
TLS_HANDSHAKE = 0x16  # the first byte of every TLS connection (a handshake record)
PROGRESS_LINES = 60
WAITING = "waiting for another tab"  # demo.ts's state of a device another tab of the page runs
# The tasks a device's earlier loads of the page reported, kept per device up to this much
# JSON (the oldest dropped): a real task is a few hundred bytes, and a poster that is not the
# page cannot grow them past MAX_STATUS_BYTES in all.
EARLIER_TASK_BYTES = MAX_STATUS_BYTES // MAX_WEB_DEVICES
BOOKS = ROOT / "fedhh" / "codec" / "books"
STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/demo.css": ("demo.css", "text/css; charset=utf-8")}


def choose_users(has_items: list[bool], count: int) -> tuple[list[int], int]:
    """The browser devices' users: the last ``count`` users that hold an item (``has_items``
    per user, over the users `fedhh up` starts); and where the Python devices' users end (they
    take every user before the first browser one)."""
    holders = [user for user, held in enumerate(has_items) if held]
    if count > len(holders):
        raise ConfigError(f"--web-devices {count}: only {len(holders)} users hold an item")
    chosen = holders[len(holders) - count:]
    return chosen, (chosen[0] if chosen else len(has_items))


def device_urls(scheme: str, port: int, count: int) -> list[str]:
    """One Connect URL of a port per device, the host names taken in turn."""
    return [f"{scheme}://{HOSTS[i % len(HOSTS)]}:{port}" for i in range(count)]


class DemoPage:
    """``with DemoPage(dist, tls) as page:``; serving from the start, stopped on exit."""

    def __init__(self, dist: Path, context: ssl.SSLContext | None) -> None:
        self.bundle = dist / "browser" / "demo.js"
        if not self.bundle.exists():
            raise ConfigError(f"the demo page's bundle {self.bundle} is missing (npm run bundle)")
        self.scheme = "https" if context is not None else "http"
        self._changed = threading.Condition()
        self._config = b""
        self._csp = ""
        self._lines: list[str] = []
        self._released: list[str] = []  # the run's released attempts, by their tasks' names
        self._devices: list[dict[str, Any]] = []
        # Per user: the tasks earlier loads of the page reported, and the tasks the current
        # load last posted (`_posted`); of the MAX_WEB_DEVICES users posted last.
        self._earlier: dict[Any, list[dict[str, Any]]] = {}
        self._current: OrderedDict[Any, list[dict[str, Any]]] = OrderedDict()
        # Per user: the load of the page that posted last, and the round the device was in
        # then without an outcome posted (an entry of its tasks, "interrupted" at its stage).
        self._loads: dict[Any, str] = {}
        self._due: dict[Any, dict[str, Any]] = {}
        handler = type("Handler", (_Handler,), {"page": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        if context is not None:
            # The handshake in the handler's thread, not in the accept loop.
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True,
                                                      do_handshake_on_connect=False)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="demo-page",
                                        daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{HOSTS[0]}:{self.port}/"

    def origins(self) -> list[str]:
        """The page's origins, under each name (the services' --web-origin)."""
        return [f"{self.scheme}://{host}:{self.port}" for host in HOSTS]

    # ---- what the page gets ----------------------------------------------------------------
    def configure(self, *, tokens: list[str], users: list[int], items: list[list[str]],
                  counts: list[list[int]], coordinator_port: int, aggregator_port: int,
                  min_cohort: int) -> None:
        """The browser devices' demo.json: device i gets tokens[i], users[i]'s items and
        counts, and the Connect ports under its host name."""
        count = len(tokens)
        coordinators = device_urls(self.scheme, coordinator_port, count)
        aggregators = device_urls(self.scheme, aggregator_port, count)
        config = {"aggregator": f"{self.scheme}://{HOSTS[0]}:{aggregator_port}",
                  "coordinators": coordinators, "aggregators": aggregators,
                  "tokens": tokens, "users": users, "items": items, "counts": counts,
                  "minCohort": min_cohort, "books": "books/", "session": secrets.token_hex(8)}
        ports = sorted({urlsplit(u).netloc for u in coordinators + aggregators}
                       | {f"{host}:{port}" for host in HOSTS
                          for port in (coordinator_port, aggregator_port)})
        connect = " ".join(f"{self.scheme}://{netloc}" for netloc in ports)
        with self._changed:
            self._config = json.dumps(config).encode()
            self._csp = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                         f"connect-src 'self' {connect}; base-uri 'none'; form-action 'none'; "
                         "frame-ancestors 'none'")

    def follow(self, run: Any) -> None:
        """Take the run's released attempts (``run``: the admin API's Run) for the page, which
        counts a device's masked input accepted in one as contributed whatever its own outcome
        (a late answer to a later stage: before, left out of its count though in the sum)."""
        released = [task_name(run.run_id, r.round, r.attempt) for r in run.rounds
                    if r.state == "released"]
        with self._changed:
            self._released = released

    def following(self, then: Callable[[Any], None]) -> Callable[[Any], None]:
        """A run's on_change that calls ``then`` and ``follow``."""
        def on_change(run: Any) -> None:
            then(run)
            self.follow(run)
        return on_change

    def say(self, line: str) -> None:
        """A line of the run's progress for the page."""
        with self._changed:
            self._lines = [*self._lines, line][-PROGRESS_LINES:]

    # ---- what the page says ----------------------------------------------------------------
    def devices(self) -> list[dict[str, Any]]:
        """The browser devices' states as the page last posted them, each with the tasks its
        earlier loads of the page reported (`_with_earlier`)."""
        with self._changed:
            return list(self._devices)

    def wait_enrolled(self, count: int, timeout_s: float) -> int:
        """Block until ``count`` browser devices have enrolled or ``timeout_s`` passed; returns
        how many have."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while (enrolled := self._enrolled()) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return enrolled

    def wait_settled(self, timeout_s: float) -> bool:
        """Block until no browser device is in a round (the page has posted how its last round
        ended) or ``timeout_s`` passed; whether they settled."""
        with self._changed:
            return self._changed.wait_for(
                lambda: not any(map(_outcome_due, self._devices)), timeout_s)

    def _enrolled(self) -> int:
        return sum(1 for d in self._devices if d.get("deviceId"))

    def _posted(self, body: bytes) -> None:
        posted = json.loads(body)
        devices = posted.get("devices") if isinstance(posted, dict) else None
        if not isinstance(devices, list) or len(devices) > MAX_WEB_DEVICES:
            raise ValueError(f"expected {{'devices': [...]}} of at most {MAX_WEB_DEVICES}")
        load = posted.get("load")
        if load is not None and not (isinstance(load, str) and len(load) <= 64):
            raise ValueError("load must be a string of at most 64 characters")
        for device in devices:
            _check_device(device)
        with self._changed:
            before = {d.get("user"): d for d in self._devices}
            kept: list[dict[str, Any]] = []
            for device in devices:
                standing = before.get(device.get("user"))
                kept.append(standing if standing is not None and
                            self._stands(standing, device, load)
                            else self._with_earlier(device, load))
            self._devices = kept
            self._changed.notify_all()

    def _stands(self, standing: dict[str, Any], device: dict[str, Any], load: str | None
                ) -> bool:
        """Whether what was posted of a device (``standing``) stands against ``device``, posted
        by ``load``: a second tab of the page posts the devices it waits for as well, and the
        page in another browser profile (or browser) posts them unenrolled (it holds no
        identity, and their tokens are spent) or failed. Before, such a post replaced the
        running devices, and the running load's next post, taken for a new load, listed every
        round it had reported twice. A reload is the same device once it has enrolled from its
        storage: its posts with the device's id count."""
        if device.get("state") == WAITING:
            return True
        ours = standing.get("deviceId")
        last = self._loads.get(device.get("user"))
        return bool(ours) and device.get("deviceId") != ours and load is not None and \
            last not in (None, "", load)

    def _with_earlier(self, device: dict[str, Any], load: str | None) -> dict[str, Any]:
        """``device`` with the tasks its earlier loads of the page reported before its own. A
        post names its page's ``load``, and a load's list only grows, so another load, or a
        list that does not extend the one last posted, is a new load (a reload, or a second
        tab taking over): the page starts its list afresh, and before, `fedhh up`'s summary
        forgot every round before the last reload (a device that contributed to round 1 read
        'demo round 2.1: device_aborted' alone). The round the old load was in without an
        outcome is kept as interrupted: its masked input may be in a released sum, where the
        new load, handed the round's task again, refuses it (before, the summary said
        'device_aborted' of that round alone)."""
        user = device.get("user")
        tasks = list(device.get("tasks") or [])
        last = self._current.get(user, [])
        before = self._loads.get(user)
        if tasks[:len(last)] != last or (load is not None and before not in (None, load)):
            due = self._due.get(user)
            earlier = self._earlier.get(user, []) + last + ([due] if due else [])
            while earlier and len(json.dumps(earlier)) > EARLIER_TASK_BYTES:
                earlier = earlier[1:]
            self._earlier[user] = earlier
        self._current[user] = tasks
        self._current.move_to_end(user)
        self._loads[user] = load or ""
        self._due[user] = ({"task": device["task"], "interrupted": device.get("stage") or "",
                            "sent": bool(device.get("sent"))}
                           if _outcome_due(device) else {})
        # (a poster that is not the page, naming new users in each post, grew both without
        # bound: up to MAX_STATUS_BYTES kept of every post)
        while len(self._current) > MAX_WEB_DEVICES:
            gone = self._current.popitem(last=False)[0]
            for kept in (self._earlier, self._loads, self._due):
                kept.pop(gone, None)
        return {**device, "tasks": self._earlier.get(user, []) + tasks}

    def _answer(self, path: str) -> tuple[bytes, str] | None:
        if path in STATIC:
            name, kind = STATIC[path]
            return (WEB / "demo" / name).read_bytes(), kind
        if path == "/demo.js":
            return self.bundle.read_bytes(), "text/javascript; charset=utf-8"
        with self._changed:
            if path == "/demo.json" and self._config:
                return self._config, "application/json"
            if path == "/progress.json":
                return (json.dumps({"lines": self._lines, "released": self._released}).encode(),
                        "application/json")
        if path.startswith("/books/"):
            name = path.removeprefix("/books/")
            if name in {p.name for p in BOOKS.glob("*.json")}:  # never a path
                return (BOOKS / name).read_bytes(), "application/json"
        return None

    # ---- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> DemoPage:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


# The fields of a device the page posts (DeviceView in clients/web/demo/demo.ts) that `fedhh up`
# reads, with their types; every post is checked against them, so a post that is not the
# page's (another process, or a page of another site: a plain POST needs no CORS preflight)
# cannot end `fedhh up` when it reports the devices (before: "spent": "x" made `summary`
# raise after the run, and a body that was a list dropped the connection unanswered).
_DEVICE_FIELDS: dict[str, tuple[type, ...]] = {
    "user": (int, str), "deviceId": (str,), "state": (str,), "task": (str,), "stage": (str,),
    "note": (str,), "noAnswerSince": (int, float), "tasks": (list,), "spent": (int, float),
    "error": (str,), "sent": (bool,)}
_TASK_FIELDS: dict[str, tuple[type, ...]] = {
    "task": (str,), "outcome": (str,), "contributed": (bool,), "detail": (str,),
    "interrupted": (str,), "sent": (bool,)}


def _check_fields(value: object, fields: dict[str, tuple[type, ...]], what: str
                  ) -> dict[str, Any]:
    """``value``, unless it is no object or a field of ``fields`` has another type
    (ValueError)."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object")
    for name, types in fields.items():
        field = value.get(name)
        if field is None:
            continue
        if not isinstance(field, types) or (isinstance(field, bool) and bool not in types):
            raise ValueError(f"{what}: {name} must be {' or '.join(t.__name__ for t in types)}")
        if float in types and not _finite(field):
            raise ValueError(f"{what}: {name} must be a finite number a float holds "
                             "(at most about 1.8e308)")
    return value


def _finite(number: Any) -> bool:
    """Whether ``number`` is a float's finite value: ``summary`` reads a number field as a
    float, and an integer of 309 digits or more (JSON's integers have no bound) made it raise
    OverflowError when `fedhh up` reported the browser devices after its run."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


def _check_device(device: object) -> None:
    """ValueError unless ``device`` is a device as the page posts it (_DEVICE_FIELDS)."""
    for task in _check_fields(device, _DEVICE_FIELDS, "a device").get("tasks") or []:
        _check_fields(task, _TASK_FIELDS, "a device's task")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a browser that refused the certificate, a closed tab: nothing for the terminal


class _Deadline:
    """Shuts ``connection`` down ``seconds`` from now unless disarmed first. A Timer's cancel
    does not stop its function once begun: a cut begun as an answer went out shut down the
    connection's next request, kept alive and in time (or, once the connection was closed, the
    socket given its descriptor's number next). Here the cut and ``disarm`` take one lock, so
    once ``disarm`` returns no cut comes, and a cut comes only while the handler holds its
    connection open (it disarms before it closes it)."""

    def __init__(self, connection: socket.socket, seconds: float) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._armed = True
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        with self._lock:
            if not self._armed:
                return
            self._armed = False
            # (through a second descriptor: shutting the TLS socket itself down here would
            # change its state under the handler's thread, which is reading it)
            with contextlib.suppress(OSError), \
                    socket.socket(fileno=os.dup(self._connection.fileno())) as other:
                other.shutdown(socket.SHUT_RDWR)

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
        self._timer.cancel()  # (only to end its thread early)


class _Handler(http.server.BaseHTTPRequestHandler):
    page: DemoPage
    timeout = 30  # a connection that sends nothing is dropped
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the demo's terminal is for the run

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket) and self._plain_http_sent_on():
            return
        super().handle()

    def _plain_http_sent_on(self) -> bool:
        """Whether the connection was plain HTTP to the HTTPS page (the address typed with
        http://), now answered with a redirect to the page and a line naming its https
        address, or sent nothing within ``HEAD_TIMEOUT_S``. Before, the failed handshake
        closed it unanswered, which Chromium shows as 'ERR_EMPTY_RESPONSE', not a word of
        https. The head is read whole first: closing on unread bytes would send a reset the
        browser shows instead of the answer."""
        deadline = time.monotonic() + HEAD_TIMEOUT_S
        # (through a second descriptor: the TLS socket has read nothing, and must not)
        with socket.socket(fileno=os.dup(self.connection.fileno())) as raw:
            try:
                raw.settimeout(HEAD_TIMEOUT_S)
                first = raw.recv(1, socket.MSG_PEEK)
                if first and first[0] == TLS_HANDSHAKE:
                    return False
                head = first and raw.recv(4096)
                while head and b"\r\n\r\n" not in head and len(head) < MAX_STATUS_BYTES:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return True
                    raw.settimeout(left)
                    more = raw.recv(4096)
                    if not more:
                        return True
                    head += more
                if head:
                    body = (f"fedhh up's demo page is served over HTTPS: open {self.page.url}"
                            "\n").encode()
                    raw.sendall(b"HTTP/1.1 307 Temporary Redirect\r\n"
                                + f"Location: {self.page.url}\r\n".encode()
                                + b"Content-Type: text/plain; charset=utf-8\r\n"
                                + f"Content-Length: {len(body)}\r\n".encode()
                                + b"Cache-Control: no-store\r\nConnection: close\r\n\r\n"
                                + body)
            except OSError:  # (a timeout among them: cut, as a request too slow over TLS is)
                pass
        return True

    def handle_one_request(self) -> None:
        """A request (a connection's TLS handshake, made at its first read, its head and its
        body) arrives within ``HEAD_TIMEOUT_S``, as the services' listeners want their heads,
        or the connection is cut. ``timeout`` bounds each read alone: a client that sent a
        header line every 20 s, never ending its head, held its thread for ever (59 such
        connections still held theirs after 80 s)."""
        self._cut = _Deadline(self.connection, HEAD_TIMEOUT_S)
        try:
            super().handle_one_request()
        finally:
            self._cut.disarm()

    def _send(self, status: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
        self._cut.disarm()  # (the answer is bounded by ``timeout`` and its size)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        if self.page._csp:
            self.send_header("Content-Security-Policy", self.page._csp)
        self.end_headers()
        self.wfile.write(body)

    def _misdirected(self) -> bool:
        """Whether the request named another host than the page's (answered 421). A page of
        another site whose name was rebound to 127.0.0.1 (DNS rebinding) reaches the port as
        its own origin, so neither CORS nor the Origin check stops it: before, its fetch of
        demo.json under ``Host: evil.example`` was answered, enrolment tokens and all. A
        request without a Host (HTTP/1.0) names no other site and is served."""
        host = self.headers.get("Host")
        ours = {f"{name}:{self.page.port}" for name in HOSTS}
        if host is None or host.strip().lower() in ours:
            return False
        self.close_connection = True
        self._send(421, (f"this server is {' or '.join(sorted(ours))}, not "
                         f"{message_text(repr(host[:200]))}\n").encode())
        return True

    def do_GET(self) -> None:  # http.server's name
        if self._misdirected():
            return
        answer = self.page._answer(urlsplit(self.path).path)
        if answer is None:
            self._send(404, b"not found")
        else:
            self._send(200, *answer)

    def _post_length(self) -> int | None:
        """The post's declared length once its head passed the checks made before its body is
        read; None once the refusal was answered (the connection then closes: its body is left
        unread, and would be read as the next request)."""
        if self._misdirected():
            return None
        refusal: tuple[int, bytes] | None = None
        length = -1
        if urlsplit(self.path).path != "/status":
            refusal = (404, b"not found")
        elif (origin := self.headers.get("Origin")) is not None and \
                origin not in self.page.origins():
            # (a browser names the page that posts: only the demo page's own posts count)
            refusal = (403, b"only the demo page posts its devices")
        else:
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                refusal = (411, b"a length is required")
            else:
                if length < 0:  # (before, answered 413 'too large')
                    refusal = (400, f"Content-Length must not be negative, got {length}"
                               .encode())
                elif length > MAX_STATUS_BYTES:
                    refusal = (413, b"too large")
        if refusal is not None:
            self.close_connection = True
            self._send(*refusal)
            return None
        return length

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: the body is asked for only once the head passed every check
        made before it is read (host, route, origin, declared length), else the refusal is the
        answer and the connection closes. Before, http.server sent 100 Continue to any request,
        refused ones too (the body then came for nothing). A GET's head has only its host."""
        if self.command == "POST":
            refused = self._post_length() is None
        else:
            refused = self.command == "GET" and self._misdirected()
        return not refused and super().handle_expect_100()

    def do_POST(self) -> None:
        length = self._post_length()
        if length is None:
            return
        try:
            self.page._posted(self.rfile.read(length))
        except ValueError as error:  # json.JSONDecodeError is one
            self._send(400, str(error).encode())
            return
        except RecursionError:
            # (a body of 100,000 nested lists, within the size cap: json's parser raised it,
            # and the connection was dropped unanswered)
            self._send(400, b"nested too deeply")
            return
        self._send(204, b"")


def _ended_as(task: dict[str, Any], attempts: dict[str, tuple[str, int]]) -> str:
    """How a task ended, as the page words it (demo.ts ``outcomeText``): a device that sent its
    masked input to an attempt that then aborted contributed to no release, so the outcome is
    named with it (before, 'contributed' alone, where the page said 'contributed
    (round_aborted)'); one whose input was accepted and whose answer to a later stage came
    late is in the sum of a released attempt, which ``attempts`` (``summary``'s) tells."""
    if "interrupted" in task:
        return _no_outcome(task, attempts, reloaded=True)
    outcome = task.get("outcome")
    if task.get("contributed"):
        if outcome == "completed":
            return "contributed"
        state, contributors = attempts.get(str(task.get("task")), ("", 0))
        return f"contributed ({outcome}" + (f"; the round was released over {contributors} "
                                            "with its input" if state == "released" else "") + ")"
    return f"{outcome}" + (f" ({task['detail']})" if task.get("detail") else "")


# After this many rounds in a row ended late with nothing contributed, the summary (and the
# page: LATE_IN_A_ROW in clients/web/demo/rounds.ts, the same number) says what to do.
LATE_IN_A_ROW = 3


def task_name(run_id: str, round_: int, attempt: int) -> str:
    """A task as the page names it (demo.ts: ``${runId} round ${round}.${attempt}``)."""
    return f"{run_id} round {round_}.{attempt}"


def late_in_a_row(tasks: list[dict[str, Any]]) -> int:
    """How many of a device's last tasks in a row ended late without its input in."""
    count = 0
    for task in reversed(tasks):
        if task.get("outcome") != "late" or task.get("contributed"):
            break
        count += 1
    return count


def _outcome_due(device: dict[str, Any]) -> bool:
    """Whether the page last showed ``device`` in a task it has posted no outcome of."""
    name = device.get("task")
    return device.get("state") == "in a round" and bool(name) and \
        not any(t.get("task") == name for t in device.get("tasks") or [])


def _unreported(device: dict[str, Any], attempts: dict[str, tuple[str, int]]) -> str:
    """The task a device was in when the page last posted, where the page posted no outcome
    for it (a tab closed or frozen in its round), told from what the run's attempts say (as
    ``_no_outcome``). Before, such a device read 'no round yet', or its rounds without the
    last, where its input was in."""
    if not _outcome_due(device):
        return ""
    return f"{device['task']}: " + _no_outcome(
        {"interrupted": device.get("stage") or "", "sent": device.get("sent"),
         "task": device["task"]}, attempts, reloaded=False)


def _no_outcome(task: dict[str, Any], attempts: dict[str, tuple[str, int]], reloaded: bool
                ) -> str:
    """A task whose outcome the page has not posted (``task``: its name, the stage it was
    ``interrupted`` at, whether its masked input was ``sent``; ``reloaded``: the page was
    reloaded in it, else its last post showed it), told from the run's attempts: a device
    whose masked input was accepted is in the sum of a released attempt."""
    state, contributors = attempts.get(str(task.get("task")), ("", 0))
    stage = task.get("interrupted") or "it"
    where = f"the page was reloaded in {stage}" if reloaded else \
        f"the page last showed it in {stage}"
    if state == "released" and task.get("sent"):
        return (f"contributed (its masked input was accepted and the round released over "
                f"{contributors}; " + (f"{where} before its outcome)" if reloaded
                                       else "its outcome not yet posted by the page)"))
    return ("no outcome " + ("(" if reloaded else "posted yet (") + where
            + (", its masked input sent" if task.get("sent") else "")
            + (f"; the round was {state}" if state else "")
            + (f" over {contributors}" if state == "released" else "") + ")")


def summary(devices: list[dict[str, Any]],
            attempts: dict[str, tuple[str, int]] | None = None) -> list[str]:
    """One line per browser device: its rounds and what became of each. ``attempts``: the
    run's attempts by their task's name (``task_name``), each (state, contributors)."""
    lines = [] if devices else ["none reported (was the page opened?)"]
    for d in devices:
        tasks = d.get("tasks") or []
        done = [f"{t.get('task')}: {_ended_as(t, attempts or {})}" for t in tasks]
        pending = _unreported(d, attempts or {})
        done += [pending] if pending else []
        who = f"device {d['deviceId']}" if d.get("deviceId") else "not enrolled"
        error = f"; failed: {d['error']}" if d.get("error") else ""
        late = late_in_a_row(tasks)
        advice = (f"; late in its last {late} rounds in a row, each charged its report's eps "
                  "with its report in no sum: its browser is too slow for the stage windows "
                  "(keep its tab in front, or give the stages longer windows: fedhh up "
                  "--stage-ms, --share-keys-ms)" if late >= LATE_IN_A_ROW else "")
        # (on one line, escaped: what a page posted never acts on `fedhh up`'s terminal; a
        # post's "\x1b[2J" or a line break in an error was printed as sent)
        lines.append(message_text(f"user {d.get('user')} ({who}, local eps spent "
                                  f"{float(d.get('spent') or 0):.3f}): "
                                  f"{', '.join(done) or 'no round yet'}{advice}{error}"))
    return lines
