"""`fedhh device`: a device process hosting a slice of a dataset's users as devices.

Each hosted user is one device with its own identity key, credential and randomness (OS entropy;
`--seed` switches to seeded streams for tests only, which makes a networked run reproduce the
per-device simulation). The enrollment token comes from `--enrollment-token-file` or
$FEDHH_ENROLLMENT_TOKEN.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedhh.cli import options

STAGES = ("advertise", "share", "masked", "unmask")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("device", help="run a device process", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(handler=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--coordinator", required=True, help="coordinator address HOST:PORT")
    p.add_argument("--ca", help="CA certificate (PEM) that signed the services' certificates")
    p.add_argument("--insecure", action="store_true", help="plaintext, loopback addresses only")
    p.add_argument("--dataset", default="shakespeare", help="dataset name or path")
    p.add_argument("--users", default=":",
                   help="users to host: START:END, shard i/N, or auto/N (a shard of N that no "
                        "other process holds, claimed under --state-dir: scaled replicas)")
    p.add_argument("--enrollment-token-file")
    p.add_argument("--state-dir",
                   help="keep enrolled identities here across restarts (with auto/N, one "
                        "directory per shard, shared by the replicas)")
    p.add_argument("--seed", type=options.non_negative_int, default=None,
                   help="TEST MODE: seeded randomness instead of OS entropy")
    p.add_argument("--drop-rate", type=options.non_negative_float, default=0.0,
                   help="fraction of tasks on which a device drops out (tests, load tests)")
    p.add_argument("--drop-stage", choices=(*STAGES, "random"), default="random",
                   help="stage at which a dropping device stops")
    p.add_argument("--max-eps-local", type=options.positive_float, default=10.0,
                   help="refuse tasks asking for a larger local epsilon (default 10)")
    p.add_argument("--min-cohort", type=options.positive_int, default=100,
                   help="refuse rounds whose release threshold n_min is smaller (default 100)")
    p.add_argument("--stats-file", help="write counters and latencies as JSON on exit")
    p.add_argument("--log-level", default="INFO")


def run(args: argparse.Namespace) -> int:
    from fedhh_device.main import run as run_process  # imports grpc: only when running

    return run_process(args)
