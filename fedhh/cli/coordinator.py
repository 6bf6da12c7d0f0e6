"""`fedhh coordinator`: run the coordinator service (server/fedhh_coordinator).

Secrets come from files or the environment: the aggregator control token
($FEDHH_CONTROL_TOKEN), the admin token ($FEDHH_ADMIN_TOKEN) and, to take selectors, the
selector token ($FEDHH_SELECTOR_TOKEN, distinct from the others), each at least 16 bytes.
Devices enroll with one-time tokens the operator mints (`fedhh admin mint-tokens`, or a file
of tokens imported at start with --enrollment-tokens-file), or with what a pluggable
attestation verifier accepts (--attestation).
"""

from __future__ import annotations

import argparse
from typing import Any

from fedhh.cli import options


def register(subparsers: Any) -> None:
    options.add_command(subparsers, "coordinator", "run the coordinator service",
                        __doc__, add_arguments, run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.add_listen_options(p, "127.0.0.1:7000")
    p.add_argument("--db", "--store", default="fedhh-coordinator.sqlite",
                   help="the store: a SQLite file, or a PostgreSQL URL "
                        "postgresql://USER@HOST:PORT/DB (password from $PGPASSWORD or a "
                        "PGPASSFILE, not in the URL; needs psycopg: pip install "
                        "fedhh[postgresql]; default fedhh-coordinator.sqlite in the working "
                        "directory); a SQLite file's folder must exist")
    p.add_argument("--signing-key", default="coordinator-signing.pem",
                   help="Ed25519 key signing tasks and round configs (created if missing, in a "
                        "folder that exists; the "
                        "public key is written to <file>.pub for the aggregator; default "
                        "coordinator-signing.pem in the working directory)")
    p.add_argument("--aggregator", required=True, type=options.remote_address,
                   help="aggregator control address HOST:PORT")
    p.add_argument("--aggregator-public-address", type=options.remote_address,
                   help="aggregator address given to devices (default: --aggregator)")
    p.add_argument("--aggregator-web-url",
                   help="the aggregator's Connect URL (https://HOST:PORT, its --web-listen as "
                        "devices reach it), given to browser devices in their tasks (default: "
                        "none; a combiner names its workers' with --worker)")
    p.add_argument("--aggregator-session-address", metavar="HOST:PORT",
                   type=options.remote_address,
                   help="the aggregator's framed session port (its --session-listen as "
                        "devices reach it), given to devices in their tasks (default: none; "
                        "a combiner names its workers' with --worker)")
    p.add_argument("--control-token-file", help="token for the aggregator's control API "
                   "(default: $FEDHH_CONTROL_TOKEN)")
    p.add_argument("--aggregator-patience-seconds", type=options.positive_float, default=600.0,
                   help="how long an aggregator (or combiner) that does not answer is waited "
                        "for: before an attempt, the run failing past it; and to settle an "
                        "attempt's round it ran, past the round's deadline its cancel and its "
                        "outcome together, the attempt charged at n_min past it (default 600)")
    p.add_argument("--enrollment-tokens-file",
                   help="one-time enrollment tokens to accept, one per line (imported at start; "
                        "only their hashes are stored)")
    options.add_enrollment_options(p)
    options.add_stream_cap_option(p, options.DEVICE_SERVICE_STREAMS_PER_CONNECTION)
    p.add_argument("--lifetime-eps", type=options.positive_float, default=10.0,
                   help="each device's aggregate epsilon across runs per period (default 10)")
    p.add_argument("--lifetime-delta", type=options.open_unit, default=1e-5,
                   help="each device's aggregate delta across runs per period (default 1e-5)")
    p.add_argument("--budget-period-days", type=options.positive_float, default=30.0,
                   help="the lifetime budget's rolling period in days (default 30)")
    p.add_argument("--admin-token-file", help="token of the admin API (default: "
                   "$FEDHH_ADMIN_TOKEN)")
    p.add_argument("--selector-token-file", help="the token selectors (`fedhh selector`) "
                   "attach with, never the control token (default: $FEDHH_SELECTOR_TOKEN; "
                   "without either, every selector is refused)")
    options.add_service_options(p, "Prometheus port (0: any)")
    p.add_argument("--dashboard-port", type=options.port_number, default=None,
                   help="serve the read-only web dashboard on this HTTPS port, with the same "
                        "TLS files, signed in with the admin token (0: any; default: off)")
    p.add_argument("--dashboard-host", default="127.0.0.1",
                   help="address of the dashboard (default 127.0.0.1)")
    p.add_argument("--demo-url", type=_page_url, default=None, metavar="URL",
                   help="a page of browser devices the dashboard's runs page links to (fedhh "
                        "up --web-devices serves one; default: no link)")
    options.add_web_options(p, "the device calls (fedhh.v1.DeviceService)")
    options.add_framed_options(p, "the device calls (fedhh.v1.DeviceService: GetTask, "
                                  "Enroll), for about half of gRPC's CPU per call,")
    p.add_argument("--ready-file", help="write {'port': ..., 'metrics_port': ..., "
                   "'dashboard_port': ..., 'web_port': ..., 'session_port': ...} when serving")


def _page_url(text: str) -> str:
    if not (text.startswith(("https://", "http://")) and text.isprintable()
            and " " not in text and len(text) <= 2048):
        raise argparse.ArgumentTypeError(f"expected an http(s):// URL, got {text!r}")
    return text




def run(args: argparse.Namespace) -> int:
    from fedhh.rpc.tls import tls_ca
    from fedhh_coordinator.main import run as run_service  # imports grpc: only when serving

    options.check_web_options(args)
    if args.tls_dir or args.insecure:
        # (before: each run's attempts aborted with "aggregator unreachable (UNAVAILABLE)",
        # whatever the cause, and only once a run was started)
        ca = tls_ca(args.tls_dir) if args.tls_dir else None
        # A mistake only: an aggregator that starts after the coordinator is no fault
        # (a run's attempt waits until it answers: docs/networked.md, "A round", step 0),
        # and the service checks its own inputs next.
        options.check_service(args.aggregator, ca, "--aggregator", "the aggregator", "",
                              args.log_level, "coordinator", ca_option="--tls-dir",
                              warn=False)
    return run_service(args)
