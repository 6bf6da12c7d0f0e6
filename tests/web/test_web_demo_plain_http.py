"""The demo page's server (fedhh/cli/webdemo.py, `fedhh up --web-devices`) serves HTTPS; a
browser that opens its address as http:// is sent to the https address, and told it in words.
Before, the failed TLS handshake closed the connection unanswered (Chromium: 'This page isn't
working: 127.0.0.1 didn't send any data. ERR_EMPTY_RESPONSE', not a word of https). Over
https the page is served as before, and a connection that sends nothing is still cut at the
head deadline.

No figure here depends on how busy the machine is: a request's head has the page's own deadline
(10 s) to come, the late head's clock is the test's, and the connection that sends nothing has
a short deadline, checked not to cut before it, and waited for as for an event, not a window."""

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
from fedhh.rpc.tls import TlsFiles, client_context, make_dev_pki

SHORT_DEADLINE_S = 0.05  # (the connection that sends nothing: its cut then comes soon)
WAIT_S = 60.0  # a readiness bound only: the wait ends as soon as the cut comes


@pytest.fixture
def page(demo_dist: Path) -> Iterator[DemoPage]:
    make_dev_pki(demo_dist / "tls", list(webdemo.HOSTS))
    context = TlsFiles.from_dir(demo_dist / "tls").server_context("the demo page")
    with DemoPage(demo_dist, context) as page:
        yield page


def test_the_page_opened_over_http_is_sent_to_its_https_address(page: DemoPage) -> None:
    assert page.url.startswith("https://")
    plain = http.client.HTTPConnection("127.0.0.1", page.port, timeout=10)
    try:
        plain.request("GET", "/", headers={"X-Padding": "x" * 10_000})  # (a head of 3 reads)
        answer = plain.getresponse()
        assert answer.status == 307
        assert answer.getheader("Location") == page.url
        assert answer.read().decode() == (f"fedhh up's demo page is served over HTTPS: open "
                                          f"{page.url}\n")
    finally:
        plain.close()


def test_the_page_is_served_over_https_as_before(page: DemoPage, demo_dist: Path) -> None:
    secure = http.client.HTTPSConnection(
        "localhost", page.port, timeout=10, context=client_context(demo_dist / "tls" / "ca.pem"))
    try:
        secure.request("GET", "/demo.js")
        answer = secure.getresponse()
        assert (answer.status, answer.read()) == (200, b"// the bundle")
    finally:
        secure.close()


def test_a_connection_that_sends_nothing_is_cut_at_the_deadline(
        page: DemoPage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webdemo, "HEAD_TIMEOUT_S", SHORT_DEADLINE_S)
    started = time.monotonic()  # (before the connection: the server's wait begins after it)
    with socket.create_connection(("127.0.0.1", page.port)) as conn:
        conn.settimeout(WAIT_S)
        assert conn.recv(1) == b""  # (cut: a recv that timed out would raise)
        assert time.monotonic() - started >= SHORT_DEADLINE_S


class _LateClock:
    """The demo page's clock (``webdemo.time``) where a plain head's deadline is over from the
    first read of it on: the head's first call sets the deadline, every later call reads a
    time past it. A head whose bytes arrive then, at any pace, is late as a whole."""

    def __init__(self) -> None:
        self.calls = 0

    def monotonic(self) -> float:
        self.calls += 1
        return time.monotonic() + (0.0 if self.calls == 1 else 2 * webdemo.HEAD_TIMEOUT_S)


def test_a_plain_head_that_ends_past_the_deadline_is_cut_unanswered(
        page: DemoPage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before (9e270e1's fix), each read past the deadline still waited 1 ms, so a head whose
    bytes kept coming was read on, up to 256 KiB, and answered: here a head of 20 kB (5 reads)
    sent at once got its 307 though the deadline was over after its first read."""
    clock = _LateClock()
    monkeypatch.setattr(webdemo, "time", clock)
    with socket.create_connection(("127.0.0.1", page.port)) as conn:
        conn.settimeout(10)
        answer = b""
        with contextlib.suppress(ConnectionError):  # (a cut with bytes unread is a reset)
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: "
                         + b"x" * 20_000 + b"\r\n\r\n")
            while more := conn.recv(4096):
                answer += more
    assert answer == b""  # (cut, not answered)
    assert clock.calls == 2  # (the deadline set, then found over after the first read)
