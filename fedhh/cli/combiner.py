"""`fedhh combiner`: run the aggregation service's leader for sharded rounds
(aggregator/fedhh_aggregator/combiner*.py; docs/scaling.md).

The combiner holds no device traffic. The coordinator (pointed at it with --aggregator) opens
each round's shards through it; it opens each shard on one of its workers (plain `fedhh
aggregator` processes, one --worker each, in index order), fetches every shard's outcome, adds
the released shard sums and gives the coordinator only the total, with every shard's evidence
of its contributors. A worker is CONTROL[=PUBLIC[=WEB_URL[=SESSION]]]: the address the combiner
dials, the one devices dial for that worker's shards (default: the same), the Connect URL browser
devices use for it (its --web-listen as they reach it; default: none; empty: none), and its
framed session port (its --session-listen as devices reach it, HOST:PORT; default: none). The
control token
(--control-token-file or $FEDHH_CONTROL_TOKEN) authenticates the coordinator here and the
combiner at its workers; --tls-dir serves TLS and its ca.pem verifies the workers.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedhh.cli import options


def register(subparsers: Any) -> None:
    options.add_command(subparsers, "combiner", "run the aggregation leader for sharded rounds",
                        __doc__, add_arguments, run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.add_listen_options(p, "127.0.0.1:7200", "and the workers' certificates")
    p.add_argument("--worker", action="append", required=True,
                   metavar="CONTROL[=PUBLIC[=WEB_URL[=SESSION]]]",
                   help="a worker aggregator (repeat, in index order): the address the combiner "
                        "dials, the one devices dial (default: the same), its Connect URL "
                        "for browser devices (https://HOST:PORT; default or empty: none) and "
                        "its framed session port (HOST:PORT; default: none)")
    p.add_argument("--coordinator-key", required=True,
                   help="the coordinator's Ed25519 public key (PEM) that signs shard configs")
    p.add_argument("--control-token-file",
                   help="bearer token of the control APIs (default: $FEDHH_CONTROL_TOKEN)")
    p.add_argument("--state-dir",
                   help="journal the rounds here, so a restarted combiner takes its running "
                        "rounds over and still answers GetOutcome; its parent folder must "
                        "exist (default: none)")
    p.add_argument("--max-rounds", type=options.positive_int, default=64,
                   help="sharded rounds held at once (default: 64)")
    p.add_argument("--result-ttl", type=options.positive_float, default=600.0,
                   help="seconds a finished round waits for its fetch (default: 600)")
    p.add_argument("--slack-seconds", type=options.positive_float, default=120.0,
                   help="seconds past a shard's last deadline before it is cancelled "
                        "(default: 120)")
    p.add_argument("--patience-seconds", type=options.positive_float, default=120.0,
                   help="seconds past that to wait for an unreachable worker (default: 120)")
    options.add_outcome_options(p)
    options.add_service_options(p)
    p.add_argument("--ready-file", help="write the bound ports as JSON once serving")


def run(args: argparse.Namespace) -> int:
    from fedhh_aggregator.combiner_main import run as run_service  # imports grpc: only here

    return run_service(args)
