"""The demo page's server (fedhh/cli/webdemo.py, `fedhh up --web-devices`) cuts a connection
whose request has not arrived within its deadline (``HEAD_TIMEOUT_S``, the services' listeners'
head deadline). Before, only each read was bounded (30 s), so a client that sent a header line
every 20 s and never ended its head held a thread of the server for ever (59 such connections
still held theirs after 80 s). A request made in time is answered as before."""

from __future__ import annotations

import contextlib
import http.client
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli import webdemo
from fedhh.cli.webdemo import DemoPage

DEADLINE_S = 0.5


@pytest.fixture
def page(demo_dist: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DemoPage]:
    monkeypatch.setattr(webdemo, "HEAD_TIMEOUT_S", DEADLINE_S)
    with DemoPage(demo_dist, None) as page:
        yield page


def _closed(conn: socket.socket) -> bool:
    """Whether the server closed ``conn``, waiting for it up to 0.1 s."""
    conn.settimeout(0.1)
    try:
        return conn.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def test_a_head_sent_a_line_at_a_time_for_ever_is_cut_at_the_deadline(page: DemoPage) -> None:
    with socket.create_connection(("127.0.0.1", page.port)) as conn:
        started = time.monotonic()
        conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        # (a line each 0.1 s, within every read's own bound: only a deadline on the whole
        # head ends it; 10 deadlines are given for it)
        while not _closed(conn) and time.monotonic() - started < 10 * DEADLINE_S:
            with contextlib.suppress(ConnectionError):  # (closed meanwhile: seen next turn)
                conn.sendall(b"X-Slow: 1\r\n")
        took = time.monotonic() - started
    assert DEADLINE_S <= took < 10 * DEADLINE_S, took
    # (the page is served, the next connection's head arriving in time)
    answer = http.client.HTTPConnection("127.0.0.1", page.port, timeout=10)
    try:
        answer.request("GET", "/demo.js")
        assert answer.getresponse().status == 200
    finally:
        answer.close()
