"""A service of this package started in this process, as the aggregator's and the combiner's
``start`` return it."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import grpc

from fedhh.rpc import serving
from fedhh.rpc.observability import start_metrics, write_ready
from fedhh.rpc.tls import TlsFiles

if TYPE_CHECKING:
    from fedhh.rpc.connect import ConnectServer  # aiohttp: imported only when served
    from fedhh.rpc.framed.server import FramedServer

log = logging.getLogger(__name__)


class ClosableRegistry(Protocol):
    def close(self) -> None: ...


RegistryT = TypeVar("RegistryT", bound=ClosableRegistry)


@dataclass
class RunningService(Generic[RegistryT]):
    """Its gRPC server, its round registry, its port (0 until bound), and what else it
    releases once the server has stopped (the combiner's channels to its workers); its
    Connect port and framed session port, if any. :meth:`stop` is the one close of these
    parts: a stop asked for in process, the signal's (``serve_until_signalled``) and a start
    that failed (``start_service``)."""

    server: grpc.aio.Server
    registry: RegistryT
    port: int = 0
    release: Callable[[], Awaitable[None]] | None = None
    web: ConnectServer | None = None  # the Connect port of the device calls, if served
    sessions: FramedServer | None = None  # the framed session port, if served
    session_port: int | None = None

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop the gRPC server (its calls in flight get ``grace`` s, the registry and its
        journal still open under them), then the side ports, the registry (its journal's
        writes finished, its lock released), then ``release``. (Before, this in-process stop
        closed the registry first, the signal's stop last: the rounds were forgotten, and the
        journal closed, under the calls the grace was for.)"""
        await self.server.stop(grace)
        if self.web is not None:
            await self.web.close()
        if self.sessions is not None:
            await self.sessions.close()
        self.registry.close()
        if self.release is not None:
            await self.release()


class ServiceSettings(Protocol):
    @property
    def listen(self) -> str: ...
    @property
    def tls(self) -> TlsFiles | None: ...
    @property
    def insecure(self) -> bool: ...
    @property
    def metrics_port(self) -> int | None: ...
    @property
    def metrics_host(self) -> str: ...
    @property
    def ready_file(self) -> Path | None: ...
    @property
    def grace_s(self) -> float: ...


async def start_service(service: RunningService[RegistryT], settings: ServiceSettings,
                        names: tuple[str, ...], parts: Callable[[], Awaitable[None]]
                        ) -> RunningService[RegistryT]:
    """Start ``service``: ``parts`` (its registry restored, its servicers added, its side
    ports started), then health and reflection, then its gRPC port bound and started, and
    ``names`` SERVING. A failure at any step closes every part that started
    (:meth:`RunningService.stop`) before the error reaches the caller. The port is bound last,
    as the coordinator's and a selector's are: a gRPC server listens from its bind, and a stop
    before its start leaves the port listening. (Before, the aggregator bound it first and
    neither it nor the combiner closed anything on a failure: a port taken since the start's
    check left the gRPC port listening, the Connect port open and the journal's lock held, so
    that the next start on that --state-dir waited for it.)"""
    try:
        await parts()
        health = serving.add_health_and_reflection(service.server, names)
        service.port = serving.bind(service.server, settings.listen, settings.tls,
                                    settings.insecure)
        await service.server.start()
        await serving.set_serving(health, names)
    except BaseException:
        await service.stop(None)
        raise
    return service


async def serve_until_signalled(service: RunningService[Any], name: str,
                                settings: ServiceSettings, **details: Any) -> None:
    """Announce a started ``service`` (its metrics endpoint, the ready file, one log line with
    ``details``), serve until SIGTERM/SIGINT, then stop it gracefully."""
    metrics = None
    try:
        metrics = await start_metrics(settings.metrics_port, settings.metrics_host, settings.tls)
        metrics_port = metrics.port
        web_port = service.web.port if service.web is not None else None
        if settings.ready_file is not None:
            write_ready(settings.ready_file, {"port": service.port, "metrics_port": metrics_port,
                                              "web_port": web_port,
                                              "session_port": service.session_port,
                                              "pid": os.getpid()})
        log.info(f"{name} serving", extra={"port": service.port, "metrics_port": metrics_port,
                                           "web_port": web_port,
                                           "session_port": service.session_port,
                                           "tls": settings.tls is not None, **details})
        await serving.wait_for_signal(service.server, settings.grace_s)
    finally:
        # A failure before the signal (the metrics port taken since the check, the ready
        # file's folder gone) stops the service here, as the coordinator's does (before, it was
        # left to the closing loop: "Exception ignored ... Event loop is closed"; the
        # registry, its journal and the side ports were left open). After the signal's
        # graceful stop the server has stopped already.
        await service.stop(None)
        if metrics is not None:
            await metrics.close()
    log.info(f"{name} stopped")
