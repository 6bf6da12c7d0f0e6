"""Structured logs and the Prometheus endpoint of a service (configured in entry points only)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedhh.output_paths import open_new
from fedhh.rpc.tls import TlsFiles

if TYPE_CHECKING:
    import ssl

    from fedhh.rpc.http_listener import Served


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra`` fields."""

    _standard: frozenset[str] = frozenset(vars(logging.makeLogRecord({})))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._standard and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO", service: str = "") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if service:
        old_factory = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = old_factory(*args, **kwargs)
            record.service = service
            return record

        logging.setLogRecordFactory(factory)


# Prometheus and an operator's curl: a scraper keeps one connection alive.
METRICS_CONNECTIONS = 16
# Prometheus scrapes every 15 s by default; a second-old page is as good to it as a fresh one.
RENDER_MAX_AGE_S = 1.0
# On every answer of the endpoint (aiohttp's own 400s too). A scraper ignores them; a browser
# opened on the port would otherwise sniff the page's type and keep it in its cache.
METRICS_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


class MetricsEndpoint:
    """The Prometheus endpoint of a service (every GET path, as prometheus_client's server
    answered), an aiohttp app on the service's event loop behind a fair
    ``fedhh.rpc.http_listener.Listener``: at most ``METRICS_CONNECTIONS`` held, each TLS
    handshake and request head within ``HEAD_TIMEOUT_S``.

    prometheus_client's own server did the TLS handshake in its one accepting thread, with no
    timeout, and gave each connection a thread for as long as it liked: one socket that sent
    nothing stopped every scrape, and 1,000 held connections took every file the process may
    open (under ``ulimit -n 1024``), so that a new gRPC call timed out.

    The page is rendered at most once per ``RENDER_MAX_AGE_S`` and served from that render in
    between: rendering runs on the service's event loop, and a flood of scrapes (845 a second
    from 16 clients) that rendered each time raised the service's health-check latency from
    0.8 to 68 ms."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.port: int | None = None
        self.served: Served | None = None
        self.clock = clock
        self.renders = 0
        self._rendered: tuple[float, bytes] | None = None

    def page(self, render: Callable[[], bytes]) -> bytes:
        """The metrics page: ``render()``'s, or the last one while it is younger than
        ``RENDER_MAX_AGE_S``."""
        now = self.clock()
        if self._rendered is None or not 0 <= now - self._rendered[0] < RENDER_MAX_AGE_S:
            self._rendered = (now, render())
            self.renders += 1
        return self._rendered[1]

    async def start(self, port: int, host: str, context: ssl.SSLContext | None) -> int:
        """Serve on ``host:port``, over TLS with ``context`` (``start_metrics`` takes it from
        ``serving.listener_context``, as every listener's)."""
        from aiohttp import web  # (only for a service asked to serve its metrics)
        from prometheus_client import REGISTRY
        from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

        from fedhh.rpc.http_listener import serve_app

        async def scrape(request: web.Request) -> web.Response:
            return web.Response(body=self.page(lambda: generate_latest(REGISTRY)),
                                headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application(client_max_size=4096)
        app.router.add_get("/{path:.*}", scrape)
        # A request that does not parse is one WARNING without the sender's bytes, as on the
        # dashboard: aiohttp's own logger wrote it at ERROR with a traceback quoting them.
        self.served = await serve_app(app, "metrics endpoint", context, host, port,
                                      METRICS_HEADERS,
                                      default_connections=METRICS_CONNECTIONS,
                                      shutdown_timeout_s=1.0)
        self.port = self.served.port
        return self.port

    async def close(self) -> None:
        if self.served is not None:
            await self.served.close()
            self.served = None


async def start_metrics(port: int | None, host: str = "127.0.0.1",
                        tls: TlsFiles | None = None,
                        has_certificate: bool = True) -> MetricsEndpoint:
    """Serve Prometheus metrics on ``host:port`` (port 0: OS-chosen; None: off, and the
    endpoint's port is None), over HTTPS with the service's certificate when it has one, like
    every other listener; ``close()`` it at shutdown. A service that has certificates but runs
    without them (``--insecure``) serves plaintext on loopback only, as its other listeners
    do (``serving.listener_context``, the one rule: before, a copy here, worded its own way,
    and the TLS context made here too); a device process (``has_certificate=False``) has none
    to serve with, and serves its counts in plaintext wherever it is asked to
    (docs/threat-model.md says why)."""
    from fedhh.rpc.serving import host_port, listener_context

    endpoint = MetricsEndpoint()
    if port is not None:
        # (without TLS files a service runs only with --insecure: it would not start otherwise)
        context = listener_context(tls, host_port(host, port), True,
                                   "the metrics (--metrics-host)") if has_certificate else None
        await endpoint.start(port, host, context)
    return endpoint


def write_ready(path: str | os.PathLike[str], content: dict[str, Any]) -> None:
    """Announce readiness: ``content`` as JSON, written atomically (readers never see half)."""
    tmp = Path(f"{os.fspath(path)}.tmp")
    with os.fdopen(open_new(tmp, 0o666), "w") as out:
        out.write(json.dumps(content))
    os.replace(tmp, path)
