"""The demo page's server (fedhh/cli/webdemo.py, `fedhh up --web-devices`) cuts a connection
whose request has not arrived within its deadline (``HEAD_TIMEOUT_S``, the services' listeners'
head deadline). Before, only each read was bounded (30 s), so a client that sent a header line
every 20 s and never ended its head held a thread of the server for ever (59 such connections
still held theirs after 80 s). A request made in time is answered as before.

The deadline's timer is the test's (``threading.Timer`` replaced): the test fires it, so no
figure here depends on how busy the machine is. Its ``cancel`` stops nothing, as a real
Timer's does not once its function has begun: the cut itself must not land after the request
it was for was answered."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fedhh.cli import webdemo
from fedhh.cli.webdemo import DemoPage

WAIT_S = 30.0  # a readiness bound only: every wait below ends as soon as its event comes


class _Timers:
    """Stands in for threading.Timer: keeps each timer's interval and function to fire."""

    def __init__(self) -> None:
        self.started: list[tuple[float, Callable[[], None]]] = []
        self.changed = threading.Condition()

    def __call__(self, interval: float, function: Callable[[], None]) -> _Timers._Timer:
        return self._Timer(self, interval, function)

    def wait_for(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.started) >= count, WAIT_S)

    class _Timer:
        daemon = False

        def __init__(self, timers: _Timers, interval: float, function: Callable[[], None]):
            self._timers, self._interval, self._function = timers, interval, function

        def start(self) -> None:
            with self._timers.changed:
                self._timers.started.append((self._interval, self._function))
                self._timers.changed.notify_all()

        def cancel(self) -> None:
            pass  # (as a real Timer's, once its function has begun)


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> _Timers:
    timers = _Timers()
    monkeypatch.setattr(threading, "Timer", timers)
    return timers


@pytest.fixture
def page(demo_dist: Path, timers: _Timers) -> Iterator[DemoPage]:
    with DemoPage(demo_dist, None) as page:
        yield page


def test_a_head_sent_a_line_at_a_time_for_ever_is_cut_at_the_deadline(
        page: DemoPage, timers: _Timers) -> None:
    with socket.create_connection(("127.0.0.1", page.port)) as conn:
        conn.settimeout(WAIT_S)
        conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        timers.wait_for(1)
        for _ in range(5):
            conn.sendall(b"X-Slow: 1\r\n")
        # (the lines renew nothing: one deadline for the whole request)
        assert [interval for interval, _ in timers.started] == [webdemo.HEAD_TIMEOUT_S]
        timers.started[0][1]()
        assert conn.recv(1) == b""  # (closed unanswered)
    # (the page is served, the next connection's head arriving in time)
    answer = http.client.HTTPConnection("127.0.0.1", page.port, timeout=WAIT_S)
    try:
        answer.request("GET", "/demo.js")
        assert answer.getresponse().status == 200
    finally:
        answer.close()


def test_a_deadline_that_fires_after_its_answer_cuts_nothing(
        page: DemoPage, timers: _Timers) -> None:
    """Before, the first request's cut, begun as its answer went out, shut the connection
    down under the second request, which had arrived in time."""
    kept = http.client.HTTPConnection("127.0.0.1", page.port, timeout=WAIT_S)
    try:
        kept.request("GET", "/demo.js")
        first = kept.getresponse()
        assert (first.status, first.read()) == (200, b"// the bundle")
        timers.wait_for(2)  # (the second: the kept connection's next request's)
        timers.started[0][1]()
        kept.request("GET", "/demo.js")
        second = kept.getresponse()
        assert (second.status, second.read()) == (200, b"// the bundle")
    finally:
        kept.close()
