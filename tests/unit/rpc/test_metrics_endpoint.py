"""A service's Prometheus endpoint (``fedhh.rpc.observability.MetricsEndpoint``) holds a bounded
number of connections and does each TLS handshake on its own. Before (prometheus_client's
server): one socket that sent nothing stopped every scrape, and 1,000 held connections took every
file the process may open, so that the service's gRPC port stopped accepting."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from raw_http_kit import raw_head

from fedhh.errors import ConfigError
from fedhh.rpc.observability import (
    METRICS_CONNECTIONS,
    RENDER_MAX_AGE_S,
    MetricsEndpoint,
    start_metrics,
)
from fedhh.rpc.tls import make_dev_pki


async def scrape(port: int, context: ssl.SSLContext | None = None,
                 source: str = "127.0.0.1") -> tuple[bytes, bytes]:
    """One GET /metrics from ``source``: the response head and body."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, local_addr=(source, 0),
        server_hostname="127.0.0.1" if context else None)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    head, _, body = (await reader.read()).partition(b"\r\n\r\n")
    writer.close()
    return head, body


def test_a_silent_socket_does_not_stop_a_scrape_over_tls(tmp_path: Path) -> None:
    pki = make_dev_pki(tmp_path, ["127.0.0.1"])
    client = ssl.create_default_context(cafile=str(pki.ca))

    async def scenario() -> None:
        endpoint = await start_metrics(0, "127.0.0.1", pki)
        assert endpoint.port is not None
        try:
            _, silent = await asyncio.open_connection("127.0.0.1", endpoint.port)
            head, body = await asyncio.wait_for(scrape(endpoint.port, client), 20)
            assert head.startswith(b"HTTP/1.1 200") and b"text/plain" in head
            assert b"python_info" in body  # (prometheus_client's default collectors)
            silent.close()
        finally:
            await endpoint.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_held_connections_are_bounded_and_a_scrape_from_elsewhere_is_served() -> None:
    async def scenario() -> None:
        endpoint = MetricsEndpoint()
        port = await endpoint.start(0, "127.0.0.1", None)
        try:
            hog = [await asyncio.open_connection("127.0.0.1", port)
                   for _ in range(3 * METRICS_CONNECTIONS)]
            assert endpoint.served is not None
            listener = endpoint.served.listener
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while listener.refused < 2 * METRICS_CONNECTIONS and loop.time() < deadline:
                await asyncio.sleep(0.01)  # (the accept loop catching up: a deadline, polled)
            assert listener.held <= METRICS_CONNECTIONS
            assert listener.refused >= 2 * METRICS_CONNECTIONS
            # Prometheus from another address takes the place of one of the idle connections.
            head, body = await asyncio.wait_for(scrape(port, source="127.0.0.2"), 20)
            assert head.startswith(b"HTTP/1.1 200") and b"python_info" in body
            for _, writer in hog:
                writer.close()
        finally:
            await endpoint.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_no_port_serves_nothing_and_closes() -> None:
    async def scenario() -> None:
        endpoint = await start_metrics(None)
        assert endpoint.port is None
        await endpoint.close()

    asyncio.run(scenario())


def test_without_tls_a_service_serves_its_metrics_on_loopback_only() -> None:
    """As its gRPC, Connect and dashboard listeners (before: --insecure with --metrics-host
    0.0.0.0 served the metrics in plaintext to any network). A device process has no
    certificate to serve them with. The rule and its words are the other listeners'
    (``check_plaintext_listener``; before, a copy: "--metrics-host 0.0.0.0: the metrics are
    served in plaintext only on loopback without TLS (--insecure)")."""
    async def scenario() -> None:
        for host, address in (("0.0.0.0", "0.0.0.0:0"), ("::", "[::]:0")):
            with pytest.raises(ConfigError) as refused:
                await start_metrics(0, host)
            assert str(refused.value) == (
                f"the metrics (--metrics-host) on {address}: plaintext is allowed on loopback "
                "addresses only; it needs TLS files (--tls-dir)")
        endpoint = await start_metrics(0, "0.0.0.0", has_certificate=False)
        assert endpoint.port is not None
        await endpoint.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_flood_of_scrapes_renders_the_page_once_per_max_age() -> None:
    """Rendering runs on the service's event loop: before, each of 845 scrapes a second
    rendered the page, and the service's health checks waited 68 ms instead of 0.8."""
    now = [1000.0]

    async def scenario() -> None:
        endpoint = MetricsEndpoint(clock=lambda: now[0])
        port = await endpoint.start(0, "127.0.0.1", None)
        try:
            bodies = [page for _ in range(3) for page in await asyncio.gather(
                *(scrape(port) for _ in range(METRICS_CONNECTIONS)))]
            assert all(head.startswith(b"HTTP/1.1 200") and b"python_info" in body
                       for head, body in bodies)
            assert endpoint.renders == 1
            now[0] += RENDER_MAX_AGE_S
            await scrape(port)
            assert endpoint.renders == 2
            now[0] -= 3600  # (a clock that went back does not keep an old page for an hour)
            await scrape(port)
            assert endpoint.renders == 3
        finally:
            await endpoint.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


@pytest.mark.parametrize(("request_line", "answer"), [("GET /metrics HTTP/1.1", "200"),
                                                      ("POST /metrics HTTP/1.1", "405"),
                                                      ("G@T /metrics HTTP/1.1", "400")])
def test_every_answer_carries_nosniff_and_no_store(request_line: str, answer: str) -> None:
    """A scrape (200), a refused method (405) and the parser's own 400: before, none carried
    either header (a browser opened on the port sniffed the page and cached it)."""
    async def scenario() -> None:
        endpoint = MetricsEndpoint()
        port = await endpoint.start(0, "127.0.0.1", None)
        try:
            status, headers = await raw_head(
                port, f"{request_line}\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        finally:
            await endpoint.close()
        assert status.split()[1] == answer, status
        assert headers.get("X-Content-Type-Options") == "nosniff", (status, headers)
        assert headers.get("Cache-Control") == "no-store", (status, headers)

    asyncio.run(asyncio.wait_for(scenario(), 60))
