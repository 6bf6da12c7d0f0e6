"""`fedhh device`: a device process hosting a slice of a dataset's users as devices.

Each hosted user is one device with its own identity key, credential and randomness (OS entropy;
`--seed` switches to seeded streams for tests only, which makes a networked run reproduce the
per-device simulation). Each device enrolls with its own one-time token from
`--enrollment-tokens-file`: either line u is the token of dataset user u (`fedhh admin
mint-tokens --count`), or each line is `USER TOKEN` for the users the file names (`fedhh admin
mint-tokens --users`, `fedhh certs --device-replicas`); give a process only the tokens of the
users it hosts (`--users tokens` hosts exactly those). A device already enrolled (its identity
in `--state-dir`) keeps it across restarts.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from fedhh.cli import options

STAGES = ("advertise", "share", "masked", "unmask")
TRANSPORT_ENV = "FEDHH_AGGREGATOR_TRANSPORT"
TASK_TRANSPORT_ENV = "FEDHH_TASK_TRANSPORT"


def register(subparsers: Any) -> None:
    options.add_command(subparsers, "device", "run a device process",
                        __doc__, add_arguments, run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--coordinator", required=True,
                   help="coordinator address HOST:PORT, or several comma-separated (the "
                        "coordinator's selectors, docs/scaling.md): each device starts at one "
                        "of them and moves to the next when it cannot reach it. HOST:PORT="
                        "FRAMED_HOST:FRAMED_PORT also names the service's framed port "
                        "(--session-listen), which the task calls then use (--task-transport)")
    p.add_argument("--task-transport", choices=("framed", "grpc"),
                   default=os.environ.get(TASK_TRANSPORT_ENV, "framed"),
                   help="ask for tasks (and enroll) on the framed port where --coordinator "
                        "names one, falling back on gRPC while it cannot be reached (framed, "
                        "the default); always over gRPC (grpc; for comparison; default from "
                        f"${TASK_TRANSPORT_ENV}, which `fedhh loadtest`'s device processes "
                        "inherit)")
    # One or the other, as for the services (before, both dialled plaintext while the start's
    # preflight asked the coordinator over TLS).
    transport = p.add_mutually_exclusive_group()
    transport.add_argument("--ca", help="CA certificate (PEM) that signed the services' "
                                        "certificates")
    transport.add_argument("--insecure", action="store_true",
                           help="plaintext, loopback addresses only")
    p.add_argument("--connect", action="store_true",
                   help="speak the Connect protocol (HTTP/1.1) to the services' web ports, as "
                        "a browser does: --coordinator is then the coordinator's --web-listen "
                        "address, and each aggregator a task names is reached at the address "
                        "--connect-aggregator maps it to")
    p.add_argument("--connect-aggregator", action="append", default=[],
                   metavar="GRPC_ADDRESS=WEB_ADDRESS",
                   help="with --connect: the web port (HOST:PORT) of the aggregator that tasks "
                        "name by its gRPC address; repeat for more")
    p.add_argument("--aggregator-transport", choices=("framed", "stream", "unary"),
                   default=os.environ.get(TRANSPORT_ENV, "framed"),
                   help="run each device's secure-aggregation session as one stream on the "
                        "aggregator's framed session port where its task names one, else as "
                        "one gRPC stream (framed, the default); always as one gRPC stream "
                        "(stream); or as the unary calls the Connect port serves (unary; for "
                        f"comparison; default from ${TRANSPORT_ENV}, which `fedhh loadtest`'s "
                        "device processes inherit)")
    p.add_argument("--devices-per-connection", type=options.positive_int, default=1024,
                   metavar="N",
                   help="simulated devices that share one gRPC connection to an aggregator, "
                        "and calls in flight on one gRPC connection to a coordinator or "
                        "selector (default 1024): a device holds a stream at an aggregator for "
                        "its whole session, and one at the coordinator for each GetTask "
                        "long-poll; an aggregator admits --max-streams-per-connection (4096) "
                        "streams on a connection, a coordinator or selector 2048")
    p.add_argument("--opens-in-flight", type=options.positive_int, default=256, metavar="N",
                   help="simulated devices whose session streams may be opening at once "
                        "(default 256): an opening device answers its aggregator's challenge "
                        "within the aggregator's --upload-idle-ms or is refused; the others "
                        "wait their turn before starting a stream")
    p.add_argument("--dataset", default="shakespeare",
                   help="dataset name or path (default shakespeare: the demo's users, built "
                        "into $FEDHH_CACHE or ./cache on first use)")
    p.add_argument("--users", default=":",
                   help="users to host: START:END, shard i/N, or tokens (the users that "
                        "--enrollment-tokens-file names); default: every user of the dataset")
    p.add_argument("--enrollment-tokens-file", metavar="PATH",
                   help="one-time enrollment tokens: line u for dataset user u, or USER TOKEN "
                        "lines")
    p.add_argument("--state-dir", required=True, metavar="DIR",
                   help="keep the devices' enrolled identities and privacy budgets here across "
                        "restarts (required: a token enrolls once, and a budget forgotten at "
                        "exit would start again from zero); made if missing, but only as the "
                        "last folder of the path: its parent must exist")
    p.add_argument("--seed", type=options.non_negative_int, default=None,
                   help="TEST MODE: seeded randomness instead of OS entropy")
    p.add_argument("--drop-rate", "--dropout", dest="drop_rate", metavar="RATE",
                   type=options.drop_rate,
                   default=0.0,
                   help="fraction of tasks on which a device drops out (tests, load tests; "
                        "a run's expected_dropout is what (k, t) is chosen for)")
    p.add_argument("--drop-stage", choices=(*STAGES, "random"), default="random",
                   help="stage at which a dropping device stops (default random: a "
                        "stage drawn for each drop)")
    p.add_argument("--max-eps-local", type=options.positive_float, default=10.0,
                   help="refuse tasks asking for a larger local epsilon (default 10)")
    p.add_argument("--min-cohort", type=options.positive_int, default=100,
                   help="refuse rounds whose release threshold n_min is smaller (default 100)")
    p.add_argument("--lifetime-eps-local", type=options.positive_float, default=100.0,
                   help="refuse reports beyond this sum of local epsilons per period "
                        "(default 100)")
    p.add_argument("--budget-period-days", type=options.positive_float, default=30.0,
                   help="the period of --lifetime-eps-local in days (default 30)")
    p.add_argument("--stats-file", help="write counters and latencies as JSON on exit")
    options.add_service_options(p, "serve Prometheus metrics (plain HTTP: a device process "
                                   "has no server certificate) on this port (0: any; default: "
                                   "off)")
    p.add_argument("--ready-file", help="write {'devices': N} once every device is enrolled")


def run(args: argparse.Namespace) -> int:
    from fedhh.rpc import serving
    from fedhh_device.main import run as run_process  # imports grpc: only when running

    # As every service's start (before, a --ready-file in a missing folder failed the process
    # once every device had enrolled, their tokens spent).
    serving.check_start(None, args.ready_file, [serving.metrics_listener(args)])
    # The coordinators are asked once the local inputs are read (before, their "cannot reach
    # ... yet" warning came above a refused --dataset or --state-dir)
    return run_process(args, lambda: check_coordinators(args))


def check_coordinators(args: argparse.Namespace) -> None:
    """Ask each --coordinator's gRPC health once before any device starts
    (``options.check_service``). Before, a wrong --ca, an address the certificate does not
    name, or a port that is not gRPC was retried in silence for ever: "device process
    started", then nothing."""
    from fedhh_device.main import coordinator_addresses

    if args.connect or not (args.ca or args.insecure):
        return  # (a Connect port has no gRPC health; no credentials: refused as it starts)
    for address, _ in coordinator_addresses(args.coordinator):
        options.check_service(address, args.ca, "--coordinator", "the coordinator",
                              "the devices keep trying", args.log_level, "device")
