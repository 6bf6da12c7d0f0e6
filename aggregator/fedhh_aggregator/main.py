"""Start and stop the aggregator; the entry point of ``fedhh aggregator`` (fedhh/cli/aggregator.py).

In-process use (tests, launchers)::

    agg = await start(AggregatorSettings(coordinator_public=raw_key, control_token=token,
                               listen="127.0.0.1:0", insecure=True))
    ...  # agg.port is the bound port
    await agg.stop()
"""

from __future__ import annotations

import argparse
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.aggregator_wire import CONTROL_SERVICE, DEVICE_SERVICE
from fedhh.rpc.credentials import load_public_key, read_secret
from fedhh.rpc.framed.server import FramedLimits, FramedServer, StreamMethod
from fedhh.rpc.http_listener import split_listen
from fedhh.rpc.observability import configure_logging
from fedhh.rpc.request_waits import RequestWaits
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.auth import TOKEN_ENV, ControlAuth
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.rounds import Limits, check_tombstone_ttl
from fedhh_aggregator.service import RunningService, serve_until_signalled, start_service
from fedhh_aggregator.servicers import ControlServicer, DeviceServicer, add_device_service
from fedhh_aggregator.session_stream import parse_message, run_session

if TYPE_CHECKING:
    from fedhh.rpc.connect import ConnectServer

log = logging.getLogger(__name__)

SERVICES = (DEVICE_SERVICE, CONTROL_SERVICE)
SESSION = f"/{DEVICE_SERVICE}/Session"


@dataclass(frozen=True)
class AggregatorSettings:
    """Everything the service needs; :meth:`from_args` builds it from the CLI options."""

    coordinator_public: bytes  # raw Ed25519 public key that signs round configs
    control_token: bytes  # bearer token of the control API (at least 16 bytes)
    listen: str = "127.0.0.1:0"
    tls: TlsFiles | None = None
    insecure: bool = False  # plaintext, loopback addresses only
    limits: Limits = field(default_factory=Limits)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    ready_file: Path | None = None
    grace_s: float = 5.0
    state_dir: Path | None = None  # the outcome journal (None: outcomes die with the process)
    # The Connect port of the device calls (fedhh.rpc.connect), for web devices; None: off.
    web_listen: str | None = None
    web_origins: tuple[str, ...] = ()
    # Each port's connections as the operator asked, None where not asked: the port's default,
    # up to what the open-file limit allows (http_listener.connection_cap).
    web_max_connections: int | None = None
    # The framed session port (fedhh.rpc.framed), the session stream without gRPC; None: off.
    session_listen: str | None = None
    session_max_connections: int | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AggregatorSettings:
        check_limit_options(args)
        tls = TlsFiles.from_dir(args.tls_dir) if args.tls_dir else None
        # (before binding: gRPC says only that it failed)
        serving.check_start(tls, args.ready_file, [
            ("--listen", args.listen), serving.metrics_listener(args),
            ("--web-listen", args.web_listen), ("--session-listen", args.session_listen)])
        limits = Limits(max_rounds=args.max_rounds, max_wait_s=args.max_wait_ms / 1000,
                        result_ttl_s=args.result_ttl, max_round_s=args.max_round_seconds,
                        max_uploads=args.max_uploads,
                        max_pending_calls=args.max_pending_calls,
                        quiet_close_s=args.quiet_close_ms / 1000,
                        quiet_close_tail=args.quiet_close_tail,
                        max_streams_per_connection=args.max_streams_per_connection,
                        max_unopened_sessions=args.max_unopened_sessions,
                        upload_idle_s=args.upload_idle_ms / 1000,
                        upload_min_rate=args.upload_min_rate,
                        max_tombstones=args.max_tombstones,
                        tombstone_ttl_s=args.tombstone_ttl)
        return cls(
            coordinator_public=load_public_key(args.coordinator_key),
            control_token=read_secret(args.control_token_file, TOKEN_ENV, "control token"),
            listen=args.listen,
            tls=tls,
            insecure=args.insecure,
            limits=limits,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            ready_file=Path(args.ready_file) if args.ready_file else None,
            state_dir=Path(args.state_dir) if args.state_dir else None,
            web_listen=args.web_listen,
            web_origins=tuple(args.web_origin),
            web_max_connections=args.web_max_connections,
            session_listen=args.session_listen,
            session_max_connections=args.session_max_connections,
        )


RunningAggregator = RunningService[RoundRegistry]

# The options that set Limits, by their argparse dest: what each must be, named as typed
# (Limits names its fields in seconds, and a refusal of "quiet_close_s ... -0.001" named
# neither the option nor the value given).
POSITIVE_INTEGERS = ("max_rounds", "max_uploads", "max_pending_calls",
                     "max_streams_per_connection", "max_unopened_sessions", "upload_min_rate",
                     "max_tombstones")
POSITIVE_NUMBERS = ("max_wait_ms", "result_ttl", "max_round_seconds", "upload_idle_ms",
                    "tombstone_ttl")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_limit_options(args: argparse.Namespace) -> None:
    """ConfigError naming the option and the value typed, for an option Limits would refuse."""
    def refuse(dest: str, rule: str) -> None:
        raise ConfigError(f"argument {_flag(dest)}: must be {rule}, got {getattr(args, dest)}")

    for dest in POSITIVE_INTEGERS:
        if not getattr(args, dest) >= 1:
            refuse(dest, "a positive integer")
    if args.max_pending_calls > 1 << 30:  # gRPC takes twice it as a C int
        refuse("max_pending_calls", f"at most {1 << 30}")
    for dest in POSITIVE_NUMBERS:
        if not getattr(args, dest) > 0:
            refuse(dest, "positive")
    if not args.quiet_close_ms >= 0:
        refuse("quiet_close_ms", ">= 0 (0: off)")
    if not 0 <= args.quiet_close_tail < 1:
        refuse("quiet_close_tail", "in [0, 1)")
    check_tombstone_ttl(args.tombstone_ttl, args.max_round_seconds,
                        ("argument --tombstone-ttl:", "--max-round-seconds"))


def server_options(limits: Limits) -> list[tuple[str, int]]:
    """The gRPC server's options beyond the receive cap and the streams per connection
    (:func:`fedhh.rpc.serving.new_server`): a backlog of not yet started calls sized for this
    service's fan-in (:func:`fedhh.rpc.serving.backlog_options`). When a stage opens every
    device submits and long-polls for its next request at about the same moment, so ~1400
    devices already overflowed gRPC's defaults: a shed masked-input upload kept its stage open
    until the deadline, a shed long-poll lost a device's unmask shares."""
    return serving.backlog_options(limits.max_pending_calls)


async def start(settings: AggregatorSettings) -> RunningAggregator:
    """Build and start the service (health SERVING once it returns; ``start_service``: a
    failure closes what had started). With a state directory, the outcomes of earlier rounds
    are restored from its journal first."""
    limits = settings.limits
    control_auth = ControlAuth(settings.control_token)
    # The control API's token is checked from the metadata, before the request is read (its
    # servicer checks it again): before, a caller without it had its message read and parsed,
    # up to the receive cap, and a malformed one was told why it did not parse.
    server = serving.new_server(
        max_receive_bytes=limits.max_message_bytes,
        max_concurrent_streams=limits.max_streams_per_connection,
        extra_options=server_options(limits),
        credential_checks={f"/{CONTROL_SERVICE}/": control_auth.check_metadata},
        request_waits=RequestWaits("grpc", timeout_s=limits.body_timeout_s))
    journal = None
    if settings.state_dir is not None:
        journal = Journal.sized(settings.state_dir, limits.max_tombstones, limits.max_rounds)
    registry = RoundRegistry(settings.coordinator_public, limits, journal)
    service = RunningAggregator(server, registry)

    async def parts() -> None:
        registry.restore()
        devices = DeviceServicer(registry)
        add_device_service(devices, server)
        pb_grpc.add_AggregatorControlServicer_to_server(
            ControlServicer(registry, control_auth), server)
        if settings.web_listen:
            service.web = await _start_web(settings, devices, settings.web_listen)
        if settings.session_listen:
            service.sessions = FramedServer(
                "aggregator's session port",
                {SESSION: StreamMethod(functools.partial(run_session, registry, port="framed"),
                                       parse_message)},
                FramedLimits(
                    limits.max_message_bytes, limits.max_streams_per_connection,
                    settings.session_max_connections), settings.tls)
            service.session_port = await service.sessions.start(
                *split_listen(settings.session_listen), settings.insecure)

    return await start_service(service, settings, SERVICES, parts)


async def _start_web(settings: AggregatorSettings, devices: DeviceServicer, address: str
                     ) -> ConnectServer:
    """The Connect port of the device calls: the unary ones (the masked vector as one
    SubmitMaskedVector), the gRPC port's receive cap, a body that must arrive as fast as an
    upload must (``upload_idle_s``, then ``upload_min_rate``), and as many large bodies
    (masked vectors) read at once as uploads are buffered (``max_uploads``), each only once
    its signed header showed an admitted device, one of each device at a time."""
    from fedhh.rpc.connect import ConnectServer  # aiohttp
    from fedhh.rpc.procedures import procedures

    limits = settings.limits
    web = ConnectServer(
        "aggregator's Connect port",
        procedures(pb.DESCRIPTOR.services_by_name["SecureAggregation"], devices,
                   head_checks={"SubmitMaskedVector": devices.masked_vector_caller}),
        limits.max_message_bytes, settings.tls, settings.web_origins,
        settings.web_max_connections,
        body_timeout_s=limits.body_timeout_s,
        large_bodies=limits.max_uploads)
    await web.start(*split_listen(address), settings.insecure)
    return web


async def serve(settings: AggregatorSettings) -> None:
    """Serve until SIGTERM/SIGINT, then stop gracefully."""
    await serve_until_signalled(await start(settings), "aggregator", settings)


def run(args: argparse.Namespace) -> int:
    """``fedhh aggregator``: configure logs, read secrets and keys, serve."""
    configure_logging(args.log_level, "aggregator")
    settings = AggregatorSettings.from_args(args)
    serving.run_service(serve(settings))
    return 0
