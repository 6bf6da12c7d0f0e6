"""Serving a grpc.aio server: uvloop, TLS or loopback-only plaintext, health and reflection,
message size limits, and graceful shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import signal
from collections.abc import Iterable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from fedhh.errors import ConfigError
from fedhh.rpc.tls import TlsFiles

log = logging.getLogger(__name__)

# Vectors travel in bounded chunks; this caps any single message well above a chunk.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


def tune_gc() -> None:
    """Run CPython's cycle collector less often in a service process.

    A service allocates many short-lived objects per call (protobuf messages, futures), so with
    the default generation-0 threshold (700 allocations) the collector runs thousands of times
    per round, and each older-generation pass walks every long-lived object of the open rounds
    (rosters, shares): profiles of the aggregator under a 1000-device load showed about 15% of
    its CPU time there. Objects allocated so far (modules, generated classes) are frozen out of
    its sight; cycles are still collected, only in larger batches."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def install_uvloop() -> None:
    """Use uvloop's event loop when available (it is a dependency on POSIX)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_server() -> grpc.aio.Server:
    return grpc.aio.server(options=OPTIONS)


def bind(server: grpc.aio.Server, address: str, tls: TlsFiles | None, insecure: bool) -> int:
    """Bind ``address`` with TLS, or in plaintext only when asked for and on loopback.

    Returns the bound port (the OS's choice for port 0).
    """
    if tls is not None:
        port = server.add_secure_port(address, tls.server_credentials())
    elif insecure:
        if not is_loopback(address):
            raise ConfigError(
                f"plaintext is allowed on loopback addresses only; {address} needs TLS files"
            )
        port = server.add_insecure_port(address)
    else:
        raise ConfigError(
            f"{address}: give TLS files (--tls-dir) or ask for --insecure on loopback")
    if port == 0:
        raise ConfigError(f"could not bind {address}")
    return port


def add_health_and_reflection(server: grpc.aio.Server, services: Iterable[str]
                              ) -> health.aio.HealthServicer:
    """Register gRPC health checking (every service SERVING) and reflection."""
    names = list(services)
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME,
                                         reflection.SERVICE_NAME], server)
    return servicer


async def set_serving(servicer: health.aio.HealthServicer, services: Iterable[str]) -> None:
    for name in ["", *services]:
        await servicer.set(name, health_pb2.HealthCheckResponse.SERVING)


async def wait_for_signal(server: grpc.aio.Server, grace: float = 5.0) -> None:
    """Serve until SIGTERM or SIGINT, then stop gracefully (in-flight calls get ``grace`` s)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await server.stop(grace)
