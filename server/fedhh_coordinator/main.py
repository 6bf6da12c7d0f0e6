"""The coordinator process: `fedhh coordinator ...`."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.output_paths import check_parent_folder, check_store_file, hold_lock
from fedhh.privacy.sum_pld import import_accountant_libraries
from fedhh.rpc import serving
from fedhh.rpc.credentials import (
    load_or_create_signing_key,
    load_signing_key,
    public_key_path,
    raw_public,
    read_secret,
)
from fedhh.rpc.observability import (
    MetricsEndpoint,
    configure_logging,
    start_metrics,
    write_ready,
)
from fedhh.rpc.serving import check_address, check_web_url
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.aggregation import ControlTokenRefused, DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.control import GrpcAggregator
from fedhh_coordinator.db import is_postgres_url, redact
from fedhh_coordinator.db.interface import StoreCorrupt
from fedhh_coordinator.db.sqlite import check_store_folder
from fedhh_coordinator.device_ports import DevicePorts, start_device_ports
from fedhh_coordinator.enrollment import (
    RateLimiter,
    attestation_factory,
    import_tokens,
    load_verifier,
)
from fedhh_coordinator.hub import SelectorHub
from fedhh_coordinator.keys import KeyOwners
from fedhh_coordinator.lobby import RETURN_S, Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import FixedRuns, ShownDenyLists, check_unfinished_runs
from fedhh_coordinator.service import AdminService, DeviceService
from fedhh_coordinator.store import Store

if TYPE_CHECKING:
    from fedhh_coordinator.dashboard.server import Dashboard  # (aiohttp: only when served)

log = logging.getLogger(__name__)
SELECTOR_TOKEN_ENV = "FEDHH_SELECTOR_TOKEN"
SERVICES = ("fedhh.v1.DeviceService", "fedhh.v1.AdminService", "fedhh.v1.SelectorControl")
# The largest message the coordinator takes. Its callers send small messages (a check-in, an
# enrollment, a run configuration with an inline codebook and deny list), so gRPC's 16 MiB would
# only let unauthenticated callers make it hold 16 MiB per concurrent call (issue 28: 80 calls of
# 15 MiB took it from 0.1 to 5.7 GB). Larger messages are refused before they are read.
MAX_RECEIVE_BYTES = 1024 * 1024
# gRPC's bandwidth-delay probing grows each stream's receive window towards the transport's
# memory quota (by default a share of the machine's memory), so 80 concurrent oversized calls,
# refused all the same, made it buffer 200-400 MiB of their data before the refusal (CI, a busy
# 2-core machine). The coordinator's messages are small; a fixed 64 KiB window per stream
# costs them nothing and bounds what a flood can make it hold (measured: 4 MiB for 240 calls).
FIXED_RECEIVE_WINDOW = (("grpc.http2.bdp_probe", 0),)
# The device calls come in bursts (a fleet's GetTask calls once its devices are enrolled, every
# device's next poll when a round ends): with gRPC's backlog of 1000, 20,000 devices at two
# selectors had 30,409 of their GetTask calls shed (CANCELLED) and retried.
SERVER_OPTIONS = (*FIXED_RECEIVE_WINDOW, *serving.backlog_options())
# The most a stop waits for the cancelled runner to end, twice at most (``_stop_runner``); it
# usually ends at once.
RUNNER_STOP_S = 5.0


@dataclass(frozen=True)
class Checked:
    """What ``check_startup`` read: the secrets and the TLS files."""

    control_token: bytes
    admin_token: bytes
    tls: TlsFiles | None
    selector_token: bytes | None = None  # None: no selector may attach


def read_selector_token(args: argparse.Namespace, control_token: bytes,
                        admin_token: bytes) -> bytes | None:
    """The token selectors attach with (--selector-token-file, else $FEDHH_SELECTOR_TOKEN), or
    None when neither is given: then the leader refuses every selector, saying which setting
    it lacks. Never the control token: the aggregation workers hold that one and are not
    trusted with cohorts, and a selector can present check-ins, with round keys it picks, for
    any enrolled device (each then charged the run's budget without taking part)."""
    path = getattr(args, "selector_token_file", None)
    if not path and not os.environ.get(SELECTOR_TOKEN_ENV):
        return None
    token = read_secret(path, SELECTOR_TOKEN_ENV, "selector token")
    source = path or "$" + SELECTOR_TOKEN_ENV
    for same, what in ((control_token, "control token"), (admin_token, "admin token")):
        if hmac.compare_digest(token, same):
            raise ConfigError(f"the selector token (from {source}) is the {what}: give "
                              "selectors a token of their own (`fedhh certs --secrets DIR` "
                              "writes selector.token); the aggregation workers hold the "
                              "control token and must not be able to attach as a selector")
    return token


def check_startup(args: argparse.Namespace) -> Checked:
    """Every option the coordinator can check before it writes anything (its signing key, its
    store, the ready file), each refusal a ConfigError naming the option and the value: the
    secrets, the TLS files, --db, --signing-key, --enrollment-tokens-file, --attestation,
    --ready-file and the addresses it will listen on. (It wrote a new signing key, a store, or
    a folder named after a URL it did not know, then failed on a missing token.)"""
    control_token = read_secret(args.control_token_file, "FEDHH_CONTROL_TOKEN",
                                "control token")
    admin_token = read_secret(args.admin_token_file, "FEDHH_ADMIN_TOKEN", "admin token")
    if hmac.compare_digest(admin_token, control_token):
        # The aggregation workers hold the control token; with it they could start and
        # cancel runs and mint enrollment tokens (enrol identities of their own).
        raise ConfigError(f"the admin token (from {args.admin_token_file or '$FEDHH_ADMIN_TOKEN'}"
                          ") is the control token: give operators a token of their own "
                          "(`fedhh certs --secrets DIR` writes admin.token); the aggregation "
                          "workers hold the control token and must not be able to start runs "
                          "or mint enrollment tokens")
    selector_token = read_selector_token(args, control_token, admin_token)
    tls = TlsFiles.from_dir(args.tls_dir) if args.tls_dir else None
    if tls is None:  # the control token would go to the aggregator in clear
        serving.check_plaintext_peer(args.aggregator, "--aggregator", "--tls-dir")
    check_db(args.db)
    check_signing_key(args.signing_key)
    if args.enrollment_tokens_file:
        check_readable("--enrollment-tokens-file", args.enrollment_tokens_file)
    if args.attestation:
        attestation_factory(args.attestation)
    serving.check_start(tls, args.ready_file, listeners(args))
    return Checked(control_token, admin_token, tls, selector_token)


def check_db(location: str) -> None:
    """``--db``: a PostgreSQL URL (``fedhh_coordinator.db.is_postgres_url``) or the path of a
    SQLite file that is, or can be made. Refused: an empty value and ``:memory:`` (SQLite
    would keep the store, the privacy ledger with it, in a throwaway database), another URL
    (``mysql://x`` made a folder ``mysql:``), a folder, a file in a folder that does not
    exist: before, the missing folders were made, so a typo in one started an empty store
    and the runs, devices and privacy spent seemed lost."""
    if is_postgres_url(location):
        return
    if not location.strip() or location == ":memory:":
        raise ConfigError(f"--db {location!r} would keep the store, the devices' privacy "
                          "ledger with it, in a throwaway database: give a SQLite file path or "
                          "a postgresql:// URL")
    scheme, sep, _ = location.partition("://")
    if sep:
        raise ConfigError(f"--db {redact(location)}: {scheme}:// is not a supported store; give "
                          "a postgresql:// URL or a SQLite file path")
    path = Path(location)
    if path.is_dir():
        raise ConfigError(f"--db {location} is a folder; give the SQLite file's path, e.g. "
                          f"{path / 'fedhh-coordinator.sqlite'}")
    if not path.exists():
        check_store_folder(location)
    check_store_file("--db", path)


def check_signing_key(location: str) -> None:
    """``--signing-key``: an Ed25519 private key in PEM, or a file that can be made in a folder
    that exists. Before, the missing folders were made, so a typo in one made a new key beside
    the real one, and the devices that pinned the real key refused every task it signed."""
    path = Path(location)
    if path.is_dir():
        raise ConfigError(f"--signing-key {location} is a folder; give the key file's path")
    if not path.exists():
        check_parent_folder(f"--signing-key {location}", path, "the key's file is made, never "
                            "a folder", "make a new key, whose tasks the devices that pinned "
                            "the coordinator's key refuse")
        check_store_file("--signing-key", path)
        return
    load_signing_key(path, f"--signing-key {location}")


def store_signing_key(store: Store, location: str) -> tuple[Ed25519PrivateKey, int]:
    """The signing key at ``location`` (made if missing), if it is the key the store's devices
    pinned when they enrolled, and how many devices are enrolled; ConfigError otherwise, before
    anything is written. Devices refuse every task signed by another key: a coordinator whose
    key file was lost (a volume not kept) made a new key in its place, and each run then failed
    with "too_few_devices" after its attempts, while every device refused every task. The
    store records the key (``Store.signing_key``); a store of enrolled devices that recorded
    none (made before it did) takes the key it is next served with, if that key's file exists;
    so does a store with no enrolled device."""
    path = Path(location)
    recorded, devices = store.signing_key()
    if not devices:
        recorded = None
    fleet = f"its {devices} enrolled device{'s' if devices != 1 else ''}"
    advice = ("Give the --signing-key the coordinator first served this store with (its "
              "file), or another --db for a new fleet; it is left as it is")
    if path.exists():
        key = load_signing_key(path, f"--signing-key {location}")
        if recorded is not None and raw_public(key) != recorded:
            raise ConfigError(
                f"--signing-key {location} (key {key_fingerprint(raw_public(key))}) is not "
                f"the key of the store {store.path} (key {key_fingerprint(recorded)}): "
                f"{fleet} pinned that one at enrollment and refuse tasks signed by any other. "
                f"{advice}")
    elif devices:
        known = f" {key_fingerprint(recorded)}" if recorded is not None else ""
        raise ConfigError(
            f"--signing-key {location} does not exist, but the store {store.path} has "
            f"{fleet}, which pinned the coordinator's key{known} at enrollment and refuse tasks "
            f"signed by any other, such as a new key made here. {advice}")
    key = load_or_create_signing_key(path)
    store.record_signing_key(raw_public(key))
    return key, devices


def key_fingerprint(public: bytes) -> str:
    """A public key as an operator compares it: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(public).hexdigest()[:16]


def check_readable(option: str, location: str) -> None:
    try:
        with open(location, "rb"):
            pass
    except OSError as error:
        raise ConfigError(f"{option} {location}: {error.strerror or error}") from None


def listeners(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """Each (option, address) the coordinator will listen on (``serving.check_start``)."""
    return [("--listen", args.listen), serving.metrics_listener(args),
            ("--dashboard-port", None if args.dashboard_port is None
             else serving.host_port(args.dashboard_host, args.dashboard_port)),
            ("--web-listen", args.web_listen), ("--session-listen", args.session_listen)]


def _written_files(args: argparse.Namespace) -> list[Path]:
    """The files a start writes: the SQLite store (its journals and its lock) and the signing
    key."""
    key = Path(args.signing_key)
    paths = [key, public_key_path(key)]
    if not is_postgres_url(args.db):
        paths += [Path(args.db + suffix)
                  for suffix in ("", "-wal", "-shm", "-journal", STORE_LOCK_SUFFIX)]
    return paths


STORE_LOCK_SUFFIX = ".lock"


def lock_sqlite_store(location: str, timeout_s: float = 60.0) -> int | None:
    """The one coordinator of a SQLite store: an exclusive lock (flock) on ``<db>.lock``, held
    for the process's life (its descriptor, returned; None for PostgreSQL, whose store takes
    an advisory lock of its own). A previous holder is waited for up to ``timeout_s`` (a
    restart overlapping the old process's exit), then ConfigError. Selectors and the
    dashboard's reader do not take it. Before, a second coordinator on the same file started
    beside the first, and both runners drove the same runs."""
    if is_postgres_url(location):
        return None
    path = location + STORE_LOCK_SUFFIX
    return hold_lock(
        Path(path), timeout_s, cannot_open=f"--db {location}: cannot open its lock file {path}",
        busy=f"another coordinator holds --db {location} (its lock {path}) after "
             f"{timeout_s:g} s: a store serves one coordinator; stop the other first "
             "(selectors beside it run `fedhh selector`)",
        waiting="waiting for another coordinator to release the store",
        context={"database": location}, logger=log)


async def _stop_runner(task: asyncio.Task[None]) -> None:
    """Cancel the runner and wait, up to ``RUNNER_STOP_S``, for it to end: what its cancelled
    round does on the way out (the round's outcome asked of the aggregation service, its
    summary written to the store) needs the channel and the store, closed after it. A runner
    still busy then is cancelled again (its wait for the service is cut short) and waited for
    as long once more. Before, it was cancelled and not waited for: that work ran after the
    store had closed, in the loop's own shutdown, or not at all."""
    if task.done():
        return  # (it ended by itself: its error is the caller's)
    for _ in range(2):
        task.cancel()
        await asyncio.wait({task}, timeout=RUNNER_STOP_S)
        if task.done():
            break
        log.warning("the runner has not stopped yet; cancelling it again",
                    extra={"waited_s": RUNNER_STOP_S})
    else:
        log.error("the runner did not stop; the store is closed under it",
                  extra={"waited_s": 2 * RUNNER_STOP_S})
        return
    if not task.cancelled() and task.exception() is not None:
        log.error("the runner failed while it stopped", exc_info=task.exception())


async def serve(args: argparse.Namespace, checked: Checked | None = None) -> int:
    checked = checked or check_startup(args)
    control_token, admin_token, tls = checked.control_token, checked.admin_token, checked.tls
    fresh = [path for path in _written_files(args) if not path.exists()]
    store, store_lock = None, None
    try:
        store_lock = lock_sqlite_store(args.db)
        store = Store(args.db)
        check_unfinished_runs(store, redact(args.db))
        # (the enrolled devices read here, before serving: a store lost after the server
        # started failed the start with devices already served)
        key, enrolled = store_signing_key(store, args.signing_key)
        if args.enrollment_tokens_file:
            added = import_tokens(store, args.enrollment_tokens_file)
            log.info("enrollment tokens imported", extra={"new": added})
        try:
            verifier = load_verifier(args.attestation, store)
        except TypeError as error:  # the factory does not take (store)
            raise ConfigError(f"--attestation {args.attestation!r}: {error}") from None
    except BaseException:
        # What only the store can tell (a token file's lines, the verifier its factory makes):
        # the files this start made are removed again, those it found are left as they were.
        if store is not None:
            store.close()
        for path in fresh:
            path.unlink(missing_ok=True)
        if store_lock is not None:
            os.close(store_lock)
        raise
    # Each part is closed in the finally below once it has started: a start-up failure (a
    # port taken since check_startup, a dashboard that cannot start) closes what started
    # before it, in order, as a stop does (before, the aggregator's channel, the metrics
    # endpoint, the dashboard, the device ports and the gRPC port started before the try and
    # were left to the process's exit, the store and its lock held until then).
    server: grpc.aio.Server | None = None
    aggregator: GrpcAggregator | None = None
    metrics: MetricsEndpoint | None = None
    dashboard: Dashboard | None = None
    ports: DevicePorts | None = None
    runner_task: asyncio.Task[None] | None = None
    try:
        budget = LifetimeBudget(args.lifetime_eps, args.lifetime_delta,
                                args.budget_period_days * 86400)
        lobby = Lobby()
        aggregator = GrpcAggregator(args.aggregator, tls, control_token)
        addresses = DeviceAddresses(args.aggregator_public_address or args.aggregator,
                                    check_web_url(args.aggregator_web_url, "--aggregator-web-url")
                                    if args.aggregator_web_url else "",
                                    check_address(args.aggregator_session_address,
                                                  "--aggregator-session-address")
                                    if args.aggregator_session_address else "")
        runner = Runner(store, aggregator, key, addresses, lobby, budget)
        runner.aggregator_patience_s = args.aggregator_patience_seconds
        # One registry of round-key owners for the devices asking here and at every selector.
        owners = KeyOwners()
        devices = DeviceService(store, lobby, key, verifier,
                                RateLimiter(args.enroll_rate, args.enroll_burst), owners)
        shown_deny = ShownDenyLists()  # (GetResults' and the dashboard's, displayed once)
        fixed = FixedRuns()  # (GetRun's and the dashboard's, each run's loaded once)
        admin = AdminService(store, runner, admin_token, budget, shown_deny, fixed,
                             runner.changes)
        hub = SelectorHub(lobby, owners, checked.selector_token, key)
        credential_checks = {"/fedhh.v1.DeviceService/GetTask": devices.authenticate,
                             "/fedhh.v1.AdminService/": admin.authenticate,
                             "/fedhh.v1.SelectorControl/": hub.authenticate}
        server = serving.new_server(MAX_RECEIVE_BYTES, args.max_streams_per_connection,
                                    SERVER_OPTIONS, credential_checks)
        pb_grpc.add_DeviceServiceServicer_to_server(devices, server)
        pb_grpc.add_AdminServiceServicer_to_server(admin, server)
        pb_grpc.add_SelectorControlServicer_to_server(hub, server)
        health = serving.add_health_and_reflection(server, SERVICES)
        metrics = await start_metrics(args.metrics_port, args.metrics_host, tls)
        metrics_port = metrics.port
        if args.dashboard_port is not None:
            from fedhh_coordinator.dashboard import start_dashboard  # aiohttp only when asked

            dashboard = await start_dashboard(store, runner, lobby, budget, args.db,
                                              admin_token, tls, args.dashboard_host,
                                              args.dashboard_port, args.insecure,
                                              demo_url=args.demo_url or "",
                                              deny=shown_deny, fixed=fixed)
        dashboard_port = dashboard.port if dashboard is not None else None
        ports = await start_device_ports(args, "coordinator", devices, credential_checks,
                                         MAX_RECEIVE_BYTES, tls)
        import_accountant_libraries()
        # Bound last: a gRPC server listens from its bind, and its stop releases the port only
        # once it has started (before, it was bound first, and a failure of a later part left
        # it taking connections that nothing served until the process exited).
        port = serving.bind(server, args.listen, tls, args.insecure)
        await server.start()
        # (devices that asked a previous process come back over their retry bound; a store
        # with none enrolled had none that could, and a first start's check-in closes at its
        # window as before, not held "for the devices reconnecting")
        if enrolled:
            lobby.expect_return(time.time() + RETURN_S)
        await serving.set_serving(health, SERVICES)
        runner_task = asyncio.create_task(runner.serve(), name="runner")
        if args.ready_file:
            write_ready(args.ready_file, {"port": port, "metrics_port": metrics_port,
                                           "dashboard_port": dashboard_port,
                                           "web_port": ports.web_port,
                                           "session_port": ports.framed_port,
                                           "public_key": str(public_key_path(args.signing_key))})
        log.info("coordinator serving", extra={"port": port, "metrics_port": metrics_port,
                                               "dashboard_port": dashboard_port,
                                               "web_port": ports.web_port,
                                               "session_port": ports.framed_port,
                                               # (without a selector token: every one refused)
                                               "selectors": checked.selector_token is not None})
        signalled = asyncio.create_task(serving.wait_for_signal(server))
        await asyncio.wait({signalled, runner_task}, return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        if runner_task.done():  # (it ends by itself only on an error the runs did not catch)
            # Serving devices with no runner would leave every run pending, silently: stop,
            # so that the supervisor (restart policy) sees it and a restart resumes the runs.
            stopped = runner_task.exception()
            if isinstance(stopped, StoreCorrupt):  # (no bug: what the operator must do, said)
                log.critical("the store is damaged; the coordinator stops",
                             extra={"error": str(stopped)})
                return 1
            if isinstance(stopped, ControlTokenRefused):
                log.critical("the aggregation service refuses the coordinator's control "
                             "token, so no attempt can be settled by its word: the "
                             "coordinator stops, its runs and their open attempts left as "
                             "they are, uncharged, until it is started with the token the "
                             "service holds", extra={"error": str(stopped)})
                return 1
            log.critical("the runner stopped; the coordinator stops (the store is left as it "
                         "is)", exc_info=stopped)
            return 1
        return 0
    finally:
        # (a failure before the signal, such as the ready file's, stops the server here: left
        # to the closing loop, gRPC's shutdown failed with "Event loop is closed")
        if server is not None:
            await server.stop(None)
        if runner_task is not None:
            await _stop_runner(runner_task)
        if ports is not None:
            await ports.close()
        if dashboard is not None:
            await dashboard.close()
        if metrics is not None:
            await metrics.close()
        if aggregator is not None:
            await aggregator.close()
        store.close()
        if store_lock is not None:
            os.close(store_lock)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, "coordinator")
    checked = check_startup(args)  # before the event loop, and before anything is written
    return serving.run_service(serve(args, checked))
