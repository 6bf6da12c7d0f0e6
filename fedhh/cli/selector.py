"""`fedhh selector`: serve the coordinator's device API (Enroll, GetTask) for a leader
coordinator, so that devices of one run are spread over several processes (docs/scaling.md,
"Selectors").

A selector authenticates devices against the coordinator's store (--db: the same PostgreSQL
database, or the same SQLite file on one host), holds its devices' check-ins, and forwards them
in batches over one stream to the leader (--leader, the coordinator's --listen address), which
draws each cohort over every selector's devices and signs the tasks; the selector hands its
members their tasks. The stream carries the selector token (--selector-token-file, or
$FEDHH_SELECTOR_TOKEN: the coordinator's --selector-token-file, selector.token from `fedhh
certs`), never the control token, which the aggregation workers hold too. Devices enrolled at a
selector get the coordinator's public key (--coordinator-key, the signing key's .pub file).
"""

from __future__ import annotations

import argparse
from typing import Any

from fedhh.cli import options
from fedhh.errors import ConfigError


def register(subparsers: Any) -> None:
    options.add_command(subparsers, "selector", "serve devices for a leader coordinator",
                        __doc__, add_arguments, run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--leader", required=True, type=options.remote_address,
                   help="the leader coordinator's address HOST:PORT (its --listen)")
    p.add_argument("--name", default="",
                   help="this selector's name in the leader's logs (default: its --listen, "
                        "with the port it is bound to; the host name where --listen is "
                        "0.0.0.0 or [::])")
    options.add_listen_options(p, "127.0.0.1:7000")
    p.add_argument("--db", "--store", required=True,
                   help="the coordinator's store: its SQLite file (on the same host) or its "
                        "PostgreSQL URL postgresql://USER@HOST:PORT/DB")
    p.add_argument("--coordinator-key", required=True,
                   help="the coordinator's public key (PEM, its signing key's .pub), given to "
                        "devices at enrollment")
    p.add_argument("--selector-token-file", help="the selector token the leader accepts "
                   "(its --selector-token-file; default: $FEDHH_SELECTOR_TOKEN)")
    # (before: selectors attached with the control token, which the aggregation workers hold)
    p.add_argument("--control-token-file", help=argparse.SUPPRESS)
    options.add_enrollment_options(p)
    options.add_stream_cap_option(p, options.DEVICE_SERVICE_STREAMS_PER_CONNECTION)
    options.add_service_options(p, "Prometheus port (0: any)")
    options.add_web_options(p, "the device calls (fedhh.v1.DeviceService)")
    options.add_framed_options(p, "the device calls (fedhh.v1.DeviceService: GetTask, "
                                  "Enroll), for about half of gRPC's CPU per call,")
    p.add_argument("--ready-file", help="write {'port': ..., 'metrics_port': ..., "
                   "'web_port': ..., 'session_port': ...} once attached to the leader")


def run(args: argparse.Namespace) -> int:
    from fedhh.rpc.tls import tls_ca
    from fedhh_coordinator.selector_main import run as run_service  # grpc: only when serving

    if args.control_token_file:
        raise ConfigError("--control-token-file: a selector attaches with the selector token, "
                          "not the control token (the aggregation workers hold that one): give "
                          "--selector-token-file, the file the coordinator's "
                          "--selector-token-file names (`fedhh certs` writes selector.token)")
    options.check_web_options(args)

    def check_leader() -> None:
        # (before: "lost the leader", code UNAVAILABLE, every few seconds, for a wrong CA, a
        # name the certificate lacks, the leader's dashboard port as well as a stopped one)
        if args.tls_dir or args.insecure:
            ca = tls_ca(args.tls_dir) if args.tls_dir else None
            options.check_service(args.leader, ca, "--leader", "the leader", "the selector "
                                  "keeps trying", args.log_level, "selector",
                                  ca_option="--tls-dir")

    # (asked once the selector's own inputs are checked: before, its "cannot reach the leader
    # ... yet" warning came above a missing --coordinator-key or --db)
    return run_service(args, check_leader)
