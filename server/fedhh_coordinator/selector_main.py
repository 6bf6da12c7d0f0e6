"""The selector process: `fedhh selector ...` (fedhh_coordinator.selector, docs/scaling.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging

from fedhh.rpc import serving
from fedhh.rpc.control_client import open_channel
from fedhh.rpc.credentials import load_public_key, read_secret
from fedhh.rpc.http_listener import raise_open_file_limit
from fedhh.rpc.observability import configure_logging, start_metrics, write_ready
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.device_ports import start_device_ports
from fedhh_coordinator.enrollment import RateLimiter, load_verifier
from fedhh_coordinator.main import MAX_RECEIVE_BYTES, SERVER_OPTIONS
from fedhh_coordinator.selector import LeaderLink, SelectorLobby
from fedhh_coordinator.service import DeviceService
from fedhh_coordinator.store import Store

log = logging.getLogger(__name__)
SERVICES = ("fedhh.v1.DeviceService",)


async def serve(args: argparse.Namespace) -> None:
    public = load_public_key(args.coordinator_key)
    control_token = read_secret(args.control_token_file, "FEDHH_CONTROL_TOKEN",
                                "control token")
    tls = TlsFiles.from_dir(args.tls_dir) if args.tls_dir else None
    store = Store(args.db, selector=True)
    verifier = load_verifier(args.attestation, store)
    lobby = SelectorLobby()
    devices = DeviceService(store, lobby, public, verifier,
                            RateLimiter(args.enroll_rate, args.enroll_burst))
    credential_checks = {"/fedhh.v1.DeviceService/GetTask": devices.authenticate}
    server = serving.new_server(MAX_RECEIVE_BYTES, extra_options=SERVER_OPTIONS,
                                credential_checks=credential_checks)
    pb_grpc.add_DeviceServiceServicer_to_server(devices, server)
    health = serving.add_health_and_reflection(server, SERVICES)
    port = serving.bind(server, args.listen, tls, args.insecure)
    channel = open_channel(args.leader, tls.channel_credentials() if tls else None)
    link = LeaderLink(lobby, channel, control_token, args.name or args.listen)
    link_task = asyncio.create_task(link.serve(), name="leader link")
    metrics_port = start_metrics(args.metrics_port, args.metrics_host, tls)
    ports = await start_device_ports(args, "selector", devices, credential_checks,
                                     MAX_RECEIVE_BYTES, tls)
    await server.start()
    # Ready once the leader has answered: a selector without the leader serves no check-in.
    await link.attached.wait()
    await serving.set_serving(health, SERVICES)
    if args.ready_file:
        write_ready(args.ready_file, {"port": port, "metrics_port": metrics_port,
                                      "web_port": ports.web_port,
                                      "session_port": ports.framed_port})
    log.info("selector serving", extra={"port": port, "leader": args.leader,
                                        "metrics_port": metrics_port,
                                        "web_port": ports.web_port,
                                        "session_port": ports.framed_port})
    try:
        await serving.wait_for_signal(server)
    finally:
        link_task.cancel()
        await ports.close()
        await channel.close()
        store.close()


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, "selector")
    serving.install_uvloop()
    serving.tune_gc()
    raise_open_file_limit()
    asyncio.run(serve(args))
    return 0
