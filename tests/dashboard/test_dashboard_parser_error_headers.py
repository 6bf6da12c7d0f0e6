"""Every answer of the dashboard's port carries its security headers, those it sends before any
handler runs included: aiohttp's 400 to a request that does not parse
(``http_listener._Protocols``) and the listener's 400 to plain HTTP on its TLS port. Before,
both had none of them (no CSP, nosniff, no-store, HSTS)."""

from __future__ import annotations

import socket
import ssl

import pytest
from dashboard_kit import Served

from fedhh_coordinator.dashboard.server import HEADERS

MALFORMED = {
    "bad chunk size": b"POST /login HTTP/1.1\r\nHost: localhost\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
    "two Content-Lengths": b"POST /login HTTP/1.1\r\nHost: localhost\r\n"
                           b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n",
    "bad method": b"G@T / HTTP/1.1\r\nHost: localhost\r\n\r\n",
}
EXPECTED = {**HEADERS, "Cache-Control": "no-store",
            "Strict-Transport-Security": "max-age=31536000"}


def _headers(head: bytes) -> dict[str, str]:
    status, *lines = head.decode("latin-1").split("\r\n")
    assert " 400 " in status, head
    return dict(line.split(": ", 1) for line in lines)


def _read_head(sock: socket.socket | ssl.SSLSocket) -> bytes:
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        assert chunk, answer
        answer += chunk
    return answer.partition(b"\r\n\r\n")[0]


@pytest.mark.parametrize("kind", MALFORMED)
def test_the_parsers_400_carries_the_dashboards_headers(served: Served, kind: str) -> None:
    context = ssl.create_default_context(cafile=str(served.tls.ca))
    with socket.create_connection((served.host, served.port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname=served.host) as tls:
        tls.sendall(MALFORMED[kind])
        headers = _headers(_read_head(tls))
    assert {key: headers.get(key) for key in EXPECTED} == EXPECTED, (kind, headers)


def test_plain_http_on_the_tls_port_gets_a_400_with_the_dashboards_headers(
        served: Served) -> None:
    with socket.create_connection((served.host, served.port), timeout=30) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        headers = _headers(_read_head(raw))
    assert {key: headers.get(key) for key in EXPECTED} == EXPECTED, headers
