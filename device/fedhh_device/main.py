"""The device process: `fedhh device ...` hosts a slice of a dataset's users as devices."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from fedhh.data.registry import resolve_dataset
from fedhh.errors import ConfigError, DatasetError
from fedhh.output_paths import (
    LAST_FOLDER_MADE,
    check_output,
    check_output_dir,
    check_parent_folder,
    open_new,
)
from fedhh.rpc import serving, task_census
from fedhh.rpc.channel_pool import StubPool
from fedhh.rpc.device_client import Transport
from fedhh.rpc.device_users import TOKENS, read_tokens, tokens_for, user_range
from fedhh.rpc.framed.client import FramedChannel, FramedStub, client_context
from fedhh.rpc.observability import configure_logging, start_metrics, write_ready
from fedhh.rpc.tls import ca_credentials
from fedhh.v1 import aggregator_pb2, coordinator_pb2
from fedhh.v1.coordinator_pb2_grpc import DeviceServiceStub
from fedhh_device.fleet import Fleet, check_tokens
from fedhh_device.report import DeviceData
from fedhh_device.secagg_run import DropPlan, Floors

log = logging.getLogger(__name__)
# A device's connections are pinged as every client's are (``fedhh.rpc.serving.KEEPALIVE_S``,
# why and how often), so a GetTask long-poll on a connection that went dead without a reset
# fails and is made again.
KEEPALIVE_S = serving.KEEPALIVE_S
KEEPALIVE_TIMEOUT_S = serving.KEEPALIVE_TIMEOUT_S
RECONNECT_MAX_MS = serving.RECONNECT_MAX_MS


def channel_options(keepalive_s: float = KEEPALIVE_S,
                    timeout_s: float = KEEPALIVE_TIMEOUT_S) -> list[tuple[str, Any]]:
    """The options of a device's gRPC channels: the message caps, the pings
    (``serving.client_keepalive_options``), reconnection at least every ``RECONNECT_MAX_MS``,
    and a connection of its own for each channel (grpc.aio channels with equal arguments
    would share one): a fleet opens several to one aggregator (--devices-per-connection)."""
    return [*serving.OPTIONS, ("grpc.use_local_subchannel_pool", 1),
            ("grpc.max_reconnect_backoff_ms", RECONNECT_MAX_MS),
            *serving.client_keepalive_options(keepalive_s, timeout_s)]


OPTIONS = channel_options()
DEVICES = coordinator_pb2.DESCRIPTOR.services_by_name["DeviceService"]
AGGREGATION = aggregator_pb2.DESCRIPTOR.services_by_name["SecureAggregation"]


def check_credentials(args: argparse.Namespace) -> None:
    """ConfigError naming the options unless the device has --ca or --insecure: the one
    refusal of its gRPC channels, framed ports and Connect calls alike (before, with
    --connect it was "give the CA that signed the services' certificates, or ask for
    plaintext on loopback", naming neither option)."""
    if not args.insecure and not args.ca:
        raise ConfigError("give --ca (the CA that signed the services' certificates) "
                          "or --insecure on loopback")


def channel_factory(args: argparse.Namespace) -> Callable[[str], grpc.aio.Channel]:
    def make(address: str) -> grpc.aio.Channel:
        check_credentials(args)
        credentials = None if args.insecure else ca_credentials(args.ca)
        return serving.open_channel(address, credentials, OPTIONS, remedy=serving.CA_REMEDY)

    return make


def framed_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """TLS to the services' framed ports, from the gRPC channels' CA (None: --insecure)."""
    check_credentials(args)
    return None if args.insecure else client_context(args.ca)


def session_factory(args: argparse.Namespace) -> Callable[[str, Any], FramedStub]:
    """Stubs of the aggregators' framed session ports, each falling back on the aggregator's
    gRPC stub while its port cannot be reached."""
    context = framed_context(args)

    def make(address: str, fallback: Any) -> FramedStub:
        return FramedStub(FramedChannel(address, context), AGGREGATION, ("Session",), fallback)

    return make


def coordinator_stubs(args: argparse.Namespace, make_channel: Callable[[str], Any]
                      ) -> tuple[list[Any], list[Any]]:
    """The device service at each --coordinator address: on its framed port where the
    address names one and --task-transport is framed (its gRPC stub the fallback), else over
    gRPC, on a connection per --devices-per-connection calls in flight (the service caps its
    streams per connection); and what to close at the end."""
    stubs: list[Any] = []
    closing: list[Any] = []
    context = None
    for address, framed in coordinator_addresses(args.coordinator):
        stub = StubPool(functools.partial(make_channel, address), DeviceServiceStub,
                        [method.name for method in DEVICES.methods], args.devices_per_connection)
        closing.append(stub)
        if framed and args.task_transport == "framed":
            if context is None:
                context = framed_context(args)
            framed_stub = FramedStub(FramedChannel(framed, context), DEVICES,
                                     ("Enroll", "GetTask"), stub)
            closing.append(framed_stub)
            stubs.append(framed_stub)
        else:
            stubs.append(stub)
    return stubs, closing


def connect_stubs(args: argparse.Namespace) -> tuple[list[Any], Callable[[str], Any]]:
    """``--connect``: Connect stubs (``fedhh.rpc.connect_client``) of the coordinator's device
    service at each --coordinator address, and a factory of stubs of the aggregators' device
    service at the web addresses --connect-aggregator maps their gRPC addresses to."""
    from fedhh.rpc.connect_client import ConnectChannel, ConnectStub  # aiohttp

    check_credentials(args)
    web: dict[str, str] = {}
    for pair in args.connect_aggregator:
        grpc_address, sep, web_address = pair.partition("=")
        if not (sep and grpc_address and web_address):
            raise ConfigError(f"--connect-aggregator is GRPC_ADDRESS=WEB_ADDRESS, got {pair!r}")
        web[grpc_address] = web_address

    def aggregator(address: str) -> Any:
        if address not in web:
            raise ConfigError(f"no --connect-aggregator gives the web port of {address}")
        return ConnectStub(ConnectChannel(web[address], args.ca, args.insecure),
                           AGGREGATION)

    coordinators = [ConnectStub(ConnectChannel(address, args.ca, args.insecure), DEVICES)
                    for address, _ in coordinator_addresses(args.coordinator)]
    return coordinators, aggregator


def coordinator_addresses(text: str) -> list[tuple[str, str]]:
    """--coordinator: one address, or several comma-separated (selectors), each with its
    framed port's after a "=" ("" if none)."""
    addresses = []
    for part in text.split(","):
        if not part.strip():
            continue
        address, *framed = (half.strip() for half in part.split("="))
        if len(framed) > 1 or framed == [""]:
            raise ConfigError(f"--coordinator entries are HOST:PORT or HOST:PORT=HOST:PORT, "
                              f"got {part.strip()!r}")
        addresses.append((serving.check_address(address, "--coordinator"),
                          serving.check_address(framed[0], "--coordinator's framed port")
                          if framed else ""))
    if not addresses:
        raise ConfigError(f"--coordinator needs HOST:PORT, got {text!r}")
    return addresses


def check_state_dir(text: str, make: bool = True) -> Path:
    """--state-dir, made if missing (unless not ``make``), once it is known to be a folder this
    process can write in a folder that exists.

    Checked before any device enrolls: an enrollment token enrolls once, so an identity that
    cannot be kept is a token lost (a rerun is refused UNAUTHENTICATED). It is required for
    the same reason: without it the identities, and the devices' privacy budgets
    (``fedhh_device.budget``), would live in memory only, and a restart would neither re-enroll
    (the tokens are used) nor remember what its devices have spent. Only the last folder is
    made: a mistyped parent (/data/devcies/state) made a whole new tree, and the process
    enrolled fresh identities there with budgets spent from zero, beside the ones it meant."""
    check_output_dir("--state-dir", text)
    folder = Path(text)
    check_parent_folder(f"--state-dir {folder}", folder, LAST_FOLDER_MADE,
                        "start new identities and budgets")
    if not make:
        return folder
    try:
        folder.mkdir(exist_ok=True)
    except OSError as error:
        raise ConfigError(f"--state-dir {folder}: cannot make this folder "
                          f"({error.strerror or error})") from None
    return folder


LOCK_FILE = ".fedhh-device.lock"
LOCK_POLL_S = 0.5


async def hold_state_dir(folder: Path, stop: asyncio.Event) -> int | None:
    """An open descriptor holding the exclusive lock of ``folder`` (released when ``serve``
    returns or the process ends), once no other ``fedhh device`` process holds it; None if
    ``stop`` is set first.

    Two processes over one --state-dir (a restart begun before the old process ended, a
    rolling update whose new replica mounts the old one's volume, the same command run twice)
    ran the same devices at once: each read a device's budget once and spent it on its own, up
    to twice the lifetime cap, and each wrote devices.json whole, so one process's enrolments
    could overwrite the other's (their tokens spent, their identities lost). The second process
    now waits, saying so, as a second tab of a web device waits for the first."""
    path = folder / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        raise ConfigError(f"--state-dir {folder}: cannot open {LOCK_FILE} "
                          f"({error.strerror or error})") from None
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not said:
                log.warning("waiting for the other fedhh device process that uses this "
                            "--state-dir to stop", extra={
                                "state_dir": str(folder), "holder": _holder(fd),
                                "why": "two processes would run the same devices and could "
                                       "spend their privacy budgets twice"})
                said = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), LOCK_POLL_S)
            if stop.is_set():
                os.close(fd)
                return None
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        if said:
            log.info("the other process let go of this --state-dir", extra={
                "state_dir": str(folder)})
        return fd


def _holder(fd: int) -> str:
    """The pid the lock's holder wrote, as read (for the log only)."""
    try:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    except OSError:
        return "unknown"


def write_stats(path: Path, devices: int, stats: Any) -> None:
    tmp = Path(f"{path}.tmp")
    try:
        with os.fdopen(open_new(tmp, 0o666), "w") as out:
            out.write(json.dumps({
                "devices": devices, "tasks": stats.tasks, "completed": stats.completed,
                "dropped": stats.dropped, "late": stats.late, "failed": stats.failed,
                "report_seconds": stats.report_seconds, "outcome_seconds": stats.outcome_seconds,
                "rpc_seconds": stats.calls.seconds, "rpc_bytes_sent": stats.calls.bytes_sent,
            }))
        os.replace(tmp, path)
    except OSError as error:  # (made unwritable since the start: check_stats_file)
        raise ConfigError(f"--stats-file {path}: cannot write it "
                          f"({error.strerror or error})") from None


@dataclass(frozen=True)
class Inputs:
    """What a device process hosts, read from its local inputs (``read_inputs``)."""

    users: range | list[int]
    hosted: list[tuple[int, DeviceData]]
    tokens: dict[int, str]
    stats_file: Path | None


def read_inputs(args: argparse.Namespace) -> Inputs:
    """The local inputs, each refusal naming its option, before the state directory is made
    and before any service is asked (``run``'s ``check_peers``): --state-dir as it can be made
    (``check_state_dir``), --stats-file, --dataset, --users and --enrollment-tokens-file
    (a token for each hosted user not enrolled in --state-dir).
    Before, the coordinator was asked first, so its "cannot reach the coordinator ... yet"
    warning came above a refused --dataset; and earlier still the folder and its lock file
    were made first and left behind."""
    check_state_dir(args.state_dir, make=False)
    check_output("--stats-file", args.stats_file)  # (written at exit, after the whole run)
    try:
        dataset = resolve_dataset(args.dataset)
    except DatasetError as error:
        # Named by its option as the others are: under compose the value is .env's
        # FEDHH_DEVICE_DATASET, which the error then names too (fedhh/cli/main.py)
        raise DatasetError(f"--dataset: {error}") from None
    if args.users == TOKENS:
        if not args.enrollment_tokens_file:
            raise ConfigError("--users tokens hosts the users of --enrollment-tokens-file; "
                              "give that file")
        users: range | list[int] = sorted(
            u for u in read_tokens(args.enrollment_tokens_file) if u < dataset.num_users)
    else:
        users = user_range(args.users, dataset.num_users)
    hosted = []
    for user in users:
        items, counts = dataset.user_items(user)
        if items.size == 0:
            continue
        words = tuple(dataset.vocabulary[i] for i in items.tolist())
        hosted.append((user, DeviceData(words, np.asarray(counts, dtype=np.int64))))
    tokens = tokens_for(args.enrollment_tokens_file, [user for user, _ in hosted])
    check_tokens([user for user, _ in hosted], tokens, Path(args.state_dir))
    return Inputs(users, hosted, tokens,
                  Path(args.stats_file) if args.stats_file else None)


async def serve(args: argparse.Namespace, inputs: Inputs) -> None:
    # Nothing below may enroll a device whose identity cannot be kept: the state directory is
    # made and locked first.
    stop = serving.stop_event()
    task_census.install(asyncio.get_running_loop())
    state_dir = check_state_dir(args.state_dir)
    held = await hold_state_dir(state_dir, stop)
    if held is None:
        return  # (stopped while another process held the state directory: nothing was done)
    try:
        await _serve_held(args, inputs, state_dir, stop)
    finally:
        # (a process's end lets go of it too; this is for a serve that failed or stopped in a
        # process that goes on, which would otherwise wait for its own lock)
        os.close(held)


async def _serve_held(args: argparse.Namespace, inputs: Inputs, state_dir: Path,
                      stop: asyncio.Event) -> None:
    hosted, users, stats_file = inputs.hosted, inputs.users, inputs.stats_file
    make_channel: Callable[[str], Any]
    coordinators: list[Any]
    if args.connect:
        coordinators, make_channel = connect_stubs(args)
        closing = coordinators
    else:
        make_channel = channel_factory(args)
        coordinators, closing = coordinator_stubs(args, make_channel)
    framed = args.aggregator_transport == "framed" and not args.connect
    fleet = Fleet(hosted, coordinators, inputs.tokens, make_channel, state_dir, args.seed,
                  DropPlan(args.drop_rate, args.drop_stage), stop,
                  Floors(max_eps_local=args.max_eps_local, min_cohort=args.min_cohort,
                         lifetime_eps_local=args.lifetime_eps_local,
                         budget_period_s=args.budget_period_days * 86400),
                  transport=None if args.connect else Transport.STREAM if framed
                  else Transport(args.aggregator_transport),
                  session_factory=session_factory(args) if framed else None,
                  devices_per_connection=args.devices_per_connection,
                  opens_in_flight=args.opens_in_flight)

    async def close() -> None:
        await fleet.close()
        for coordinator in closing:
            await coordinator.close()

    try:
        endpoint = await start_metrics(args.metrics_port, args.metrics_host,
                                       has_certificate=False)
    except BaseException:  # (a --metrics-port taken since the start's check)
        await close()
        raise
    if args.metrics_port is not None:  # (registered once the endpoint serves: no await between)
        from fedhh_device import metrics

        metrics.register(fleet, len(hosted))
    metrics_port = endpoint.port
    log.info("device process started",
             extra={"devices": len(hosted), "users": _describe(users),
                    "metrics_port": metrics_port})

    def enrolled() -> None:
        log.info("devices enrolled", extra={"devices": len(hosted)})
        if args.ready_file:
            write_ready(args.ready_file, {"devices": len(hosted), "metrics_port": metrics_port})

    runner = asyncio.create_task(fleet.run(enrolled))
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopped = stopper in done  # asked to stop (a signal); else the fleet ended by itself
    stop.set()
    runner.cancel()
    (outcome,) = await asyncio.gather(runner, return_exceptions=True)
    await endpoint.close()
    await close()
    if stats_file is not None:
        write_stats(stats_file, len(hosted), fleet.stats)
    # (the other services log their stop; before, a device process's last line was its start)
    log.info("device process stopped", extra={"devices": len(hosted), "asked_to_stop": stopped})
    if not stopped and isinstance(outcome, Exception):
        # Its devices could not enroll or run (no token, a refused token, an unwritable state
        # directory): the process fails with the reason, so a supervisor sees it.
        raise outcome


def _describe(users: range | list[int]) -> str:
    """How the log names the hosted users: START:END for a range, else their count and ends."""
    if isinstance(users, range):
        return f"{users.start}:{users.stop}"
    return f"{len(users)} users {users[0]}..{users[-1]}" if users else "no users"


def run(args: argparse.Namespace, check_peers: Callable[[], None] = lambda: None) -> int:
    """Run the device process: its local inputs read, then ``check_peers`` (the CLI asks the
    coordinators' health), then the devices."""
    configure_logging(args.log_level, "device")
    inputs = read_inputs(args)
    check_peers()
    serving.run_service(serve(args, inputs))
    return 0
