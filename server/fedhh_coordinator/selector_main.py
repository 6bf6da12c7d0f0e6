"""The selector process: `fedhh selector ...` (fedhh_coordinator.selector, docs/scaling.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable

import grpc
from grpc_health.v1 import health_pb2

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.control_client import open_channel
from fedhh.rpc.credentials import load_public_key, read_secret
from fedhh.rpc.health import Health
from fedhh.rpc.observability import (
    MetricsEndpoint,
    configure_logging,
    start_metrics,
    write_ready,
)
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.db import check_selector_store
from fedhh_coordinator.device_ports import DevicePorts, start_device_ports
from fedhh_coordinator.enrollment import RateLimiter, attestation_factory, load_verifier
from fedhh_coordinator.hub import MAX_NAME_BYTES
from fedhh_coordinator.main import MAX_RECEIVE_BYTES, SELECTOR_TOKEN_ENV, SERVER_OPTIONS
from fedhh_coordinator.selector import (
    LeaderLink,
    LeaderRefused,
    SelectorLobby,
    WrongCoordinatorKey,
)
from fedhh_coordinator.service import DeviceService
from fedhh_coordinator.store import Store

log = logging.getLogger(__name__)
SERVICES = ("fedhh.v1.DeviceService",)
LINK_STOP_S = 10.0  # the most a stop waits for the cancelled leader link to end
MAX_PORT = 65535
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def selector_name(args: argparse.Namespace, port: int = MAX_PORT) -> str:
    """--name, else --listen's host with ``port``, the one the selector is bound to (before,
    the --listen text: every selector on port 0 was "127.0.0.1:0" in the leader's logs), the
    machine's host name for a host that names every address (``0.0.0.0``, ``[::]``): compose's
    and Kubernetes' replicas all listen so, and were each "0.0.0.0:7000" at the leader, whose
    lines on a selector attached, detached or not acknowledging its tasks then named none of
    them; the host name is the container's (``docker ps``) or the pod's. Checked here as the
    leader checks it, since a leader that refuses the name refuses each reconnection too, and
    the selector would retry forever; the default ``port`` is the widest, so a check before the
    bind refuses whatever the bound port would."""
    host = args.listen.rpartition(":")[0]
    if host.strip("[]") in WILDCARD_HOSTS:
        host = socket.gethostname()
    name = args.name or f"{host}:{port}"
    size = len(name.encode())
    if 1 <= size <= MAX_NAME_BYTES and name.isprintable():
        return name
    if not args.name:
        raise ConfigError(f"--listen {args.listen!r} is too long to name the selector (at most "
                          f"{MAX_NAME_BYTES} bytes, got {size}): give --name")
    raise ConfigError(f"--name must be 1 to {MAX_NAME_BYTES} printable bytes, got {size} "
                      f"bytes{'' if name.isprintable() else ' with unprintable characters'}")


def link_health(health: Health) -> Callable[[bool], Awaitable[None]]:
    """What the leader link tells the selector's gRPC health: the device service is SERVING
    while attached to the leader and NOT_SERVING while not (readiness reads it: k8s's
    readinessProbe, compose's healthcheck; before, it stayed SERVING once first attached, so a
    selector that had lost its leader, and serves no check-in, stayed in service). The process
    overall ("") stays SERVING once first attached: k8s's livenessProbe reads it, and a
    selector whose leader is away is alive (restarting it would not bring the leader back)."""
    async def tell(linked: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if linked
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        for service in SERVICES:
            await health.set(service, status)
    return tell


def wrong_key(args: argparse.Namespace) -> ConfigError:
    log.error("stopping: the leader's tasks do not verify under --coordinator-key; devices "
              "that enrolled here since the start hold that key, reject every task and must "
              "enroll again", extra={"coordinator_key": args.coordinator_key})
    return ConfigError(f"--coordinator-key {args.coordinator_key} is not the key the leader "
                       "signs its tasks with (give the .pub beside the coordinator's "
                       "--signing-key)")


def refused(args: argparse.Namespace, error: LeaderRefused) -> ConfigError:
    if error.code is grpc.StatusCode.UNAUTHENTICATED:
        remedy = ("give the coordinator's selector token (--selector-token-file or "
                  f"${SELECTOR_TOKEN_ENV}, the selector.token `fedhh certs --secrets` writes; "
                  "the coordinator needs it too)")
    else:
        remedy = "check --name"
    return ConfigError(f"the leader {args.leader} refused this selector ({error}): {remedy}")


async def serve(args: argparse.Namespace) -> None:
    selector_name(args)  # (refused before anything starts)
    public = load_public_key(args.coordinator_key)
    selector_token = read_secret(args.selector_token_file, SELECTOR_TOKEN_ENV,
                                 "selector token")
    # (a plaintext --leader off loopback was refused by check_startup, which run calls first)
    tls = TlsFiles.from_dir(args.tls_dir) if args.tls_dir else None
    store = Store(args.db, selector=True)
    # Each part is closed in the finally below once it has started: a start-up failure (a
    # port taken since check_startup, the verifier's factory) closes what started before it,
    # in order, as a stop does (before, the leader link, the metrics endpoint, the device
    # ports and the gRPC port started before the try and were left to the process's exit).
    server: grpc.aio.Server | None = None
    channel: grpc.aio.Channel | None = None
    link_task: asyncio.Task[None] | None = None
    metrics: MetricsEndpoint | None = None
    ports: DevicePorts | None = None
    try:
        verifier = load_verifier(args.attestation, store)
        lobby = SelectorLobby()
        devices = DeviceService(store, lobby, public, verifier,
                                RateLimiter(args.enroll_rate, args.enroll_burst))
        credential_checks = {"/fedhh.v1.DeviceService/GetTask": devices.authenticate}
        server = serving.new_server(MAX_RECEIVE_BYTES, args.max_streams_per_connection,
                                    SERVER_OPTIONS, credential_checks)
        pb_grpc.add_DeviceServiceServicer_to_server(devices, server)
        health = serving.add_health_and_reflection(server, SERVICES)
        # (PEER_OPTIONS: the stream to a restarted leader is made again within RETURN_S, as
        # the devices' GetTask is, LeaderLink pausing at most 7.5 s between tries)
        channel = open_channel(args.leader, tls.channel_credentials() if tls else None)
        metrics = await start_metrics(args.metrics_port, args.metrics_host, tls)
        metrics_port = metrics.port
        ports = await start_device_ports(args, "selector", devices, credential_checks,
                                         MAX_RECEIVE_BYTES, tls)
        # Bound last: a gRPC server listens from its bind, and its stop releases the port only
        # once it has started (a failure between the two left the port taking connections
        # that nothing served).
        port = serving.bind(server, args.listen, tls, args.insecure)
        await server.start()
        # (attaches once bound: its name holds the bound port)
        link = LeaderLink(lobby, channel, selector_token, selector_name(args, port), public,
                          link_health(health))
        link_task = asyncio.create_task(link.serve(), name="leader link")
        # Ready once the leader has answered: a selector without the leader serves no
        # check-in.
        attached = asyncio.create_task(link.attached.wait())
        await asyncio.wait({attached, link_task}, return_when=asyncio.FIRST_COMPLETED)
        attached.cancel()
        if not link_task.done():
            await serving.set_serving(health, SERVICES)
            await link_health(health)(link.linked)  # (a loss before this line ran)
            if args.ready_file:
                write_ready(args.ready_file, {"port": port, "metrics_port": metrics_port,
                                              "web_port": ports.web_port,
                                              "session_port": ports.framed_port})
            log.info("selector serving", extra={"port": port, "leader": args.leader,
                                                "metrics_port": metrics_port,
                                                "web_port": ports.web_port,
                                                "session_port": ports.framed_port})
            signalled = asyncio.create_task(serving.wait_for_signal(server))
            await asyncio.wait({signalled, link_task}, return_when=asyncio.FIRST_COMPLETED)
            signalled.cancel()
        if link_task.done():  # (the link ends by itself only on an error)
            await server.stop(0)
            error = link_task.exception()
            if isinstance(error, WrongCoordinatorKey):
                raise wrong_key(args) from None
            if isinstance(error, LeaderRefused):
                raise refused(args, error) from None
            if error is not None:
                raise error
    finally:
        # (a failure before the signal, such as the ready file's, stops the server here, as
        # the coordinator's does: left to the closing loop, gRPC's shutdown failed with "Event
        # loop is closed"; after the signal's graceful stop this stops nothing)
        if server is not None:
            await server.stop(None)
        if link_task is not None:
            link_task.cancel()
            # (its own finally tells the health service: done before the channel closes)
            await asyncio.wait({link_task}, timeout=LINK_STOP_S)
        if ports is not None:
            await ports.close()
        if metrics is not None:
            await metrics.close()
        if channel is not None:
            await channel.close()
        store.close()


def check_startup(args: argparse.Namespace) -> None:
    """What the selector refuses before it opens its store, asks the leader (``run``'s
    ``check_peers``) or starts its loop (``serving.check_start``): a plaintext --leader off
    loopback, its TLS files, --name, --coordinator-key, the selector token, a SQLite --db that
    is no file, --ready-file, the addresses it will listen on, and --attestation, as the
    coordinator's start does. (Before, the leader was asked first: its "cannot reach the
    leader ... yet" warning came above a missing --coordinator-key or --db.)"""
    if not args.tls_dir:  # the selector token would go to the leader in clear
        serving.check_plaintext_peer(args.leader, "--leader", "--tls-dir")
    # (the TLS folder first, as the aggregator and combiner read theirs: a --tls-dir given the
    # secrets folder, which holds no ca.pem, is named before the key file it does hold)
    tls = TlsFiles.from_dir(args.tls_dir) if args.tls_dir else None
    selector_name(args)
    load_public_key(args.coordinator_key)
    read_secret(args.selector_token_file, SELECTOR_TOKEN_ENV, "selector token")
    check_selector_store(args.db)
    if args.attestation:
        attestation_factory(args.attestation)
    serving.check_start(tls, args.ready_file,
                        [("--listen", args.listen), serving.metrics_listener(args),
                         ("--web-listen", args.web_listen),
                         ("--session-listen", args.session_listen)])


def run(args: argparse.Namespace, check_peers: Callable[[], None] = lambda: None) -> int:
    """Run the selector: its local inputs checked (``check_startup``), then ``check_peers``
    (the CLI asks the leader's health), then the service."""
    configure_logging(args.log_level, "selector")
    check_startup(args)  # before the event loop, and before anything is written
    check_peers()
    serving.run_service(serve(args))
    return 0
