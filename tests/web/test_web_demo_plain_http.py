"""The demo page's server (fedhh/cli/webdemo.py, `fedhh up --web-devices`) serves HTTPS; a
browser that opens its address as http:// is sent to the https address, and told it in words.
Before, the failed TLS handshake closed the connection unanswered (Chromium: 'This page isn't
working: 127.0.0.1 didn't send any data. ERR_EMPTY_RESPONSE', not a word of https). Over
https the page is served as before, and a connection that sends nothing is still cut at the
head deadline."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli import webdemo
from fedhh.cli.webdemo import DemoPage
from fedhh.rpc.tls import TlsFiles, client_context, make_dev_pki

DEADLINE_S = 0.5


@pytest.fixture
def page(demo_dist: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DemoPage]:
    monkeypatch.setattr(webdemo, "HEAD_TIMEOUT_S", DEADLINE_S)
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


def test_a_connection_that_sends_nothing_is_cut_at_the_deadline(page: DemoPage) -> None:
    with socket.create_connection(("127.0.0.1", page.port)) as conn:
        started = time.monotonic()
        conn.settimeout(10 * DEADLINE_S)
        assert conn.recv(1) == b""
        assert DEADLINE_S <= time.monotonic() - started < 10 * DEADLINE_S


def test_a_plain_head_sent_a_line_at_a_time_is_cut_at_the_deadline(page: DemoPage) -> None:
    with socket.create_connection(("127.0.0.1", page.port)) as conn:
        started = time.monotonic()
        conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        conn.settimeout(DEADLINE_S / 5)
        answer = b""
        while time.monotonic() - started < 10 * DEADLINE_S:
            try:
                conn.sendall(b"X-Slow: 1\r\n")
                more = conn.recv(4096)
            except TimeoutError:
                continue
            except ConnectionError:
                break
            if not more:
                break
            answer += more
        took = time.monotonic() - started
    assert answer == b""  # (cut, not answered: its head never ended)
    assert DEADLINE_S <= took < 10 * DEADLINE_S, took
