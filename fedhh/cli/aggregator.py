"""`fedhh aggregator`: run the secure-aggregation service (aggregator/fedhh_aggregator).

The coordinator opens each round with a config it signed (verified against --coordinator-key) and
authenticates control calls with the control token (--control-token-file, or $FEDHH_CONTROL_TOKEN;
at least 16 bytes). Devices are admitted per round by the coordinator's admissions. Serves TLS
from --tls-dir (server.pem, server.key, ca.pem), or plaintext with --insecure on loopback only.
Once serving, --ready-file receives {"port": ..., "metrics_port": ..., "web_port": ...,
"session_port": ..., "pid": ...} as JSON.
SIGTERM or SIGINT stops it gracefully.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedhh.cli import options

# (a fraction of a stage's expected devices: 0 is "always the whole spell")
QUIET_CLOSE_TAIL = options.number_in(lambda x: 0 <= x < 1, "in [0, 1)")


def register(subparsers: Any) -> None:
    options.add_command(subparsers, "aggregator", "run the secure-aggregation service",
                        __doc__, add_arguments, run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.add_listen_options(p, "127.0.0.1:7100")
    p.add_argument("--coordinator-key", required=True,
                   help="the coordinator's Ed25519 public key (PEM), which signs round configs "
                        "and device admissions")
    p.add_argument("--control-token-file",
                   help="bearer token of the control API (default: $FEDHH_CONTROL_TOKEN)")
    options.add_service_options(p)
    options.add_web_options(p, "the device calls (fedhh.v1.SecureAggregation)")
    options.add_framed_options(p, "the session stream (SecureAggregation.Session), for about "
                                  "half of gRPC's CPU per device,")
    p.add_argument("--ready-file", help="write the bound ports as JSON once serving")
    p.add_argument("--max-rounds", type=options.positive_int, default=16,
                   help="rounds held at once, running or waiting to be fetched (default: 16)")
    p.add_argument("--max-uploads", type=options.positive_int, default=32,
                   help="masked vectors buffered at once (default: 32)")
    p.add_argument("--max-pending-calls", type=options.positive_int, default=16_384,
                   help="calls gRPC may queue before shedding them (default: 16384; gRPC's own "
                        "default of 1000 sheds the bursts of a large fleet)")
    p.add_argument("--quiet-close-ms", type=options.non_negative_int, default=0,
                   help="close a stage before its deadline once n_min devices answered and "
                        "none for this long (default: 0, off: every stage that lost a device "
                        "waits for its deadline)")
    p.add_argument("--quiet-close-tail", type=QUIET_CLOSE_TAIL, default=0.05,
                   help="with this fraction (or less) of a stage's expected devices missing, a "
                        "quarter of --quiet-close-ms of silence closes it; with more than four "
                        "times it missing, silence does not (default: 0.05; 0: always the whole "
                        "spell, whatever is missing)")
    p.add_argument("--max-wait-ms", type=options.positive_int, default=60_000,
                   help="cap of any long-poll (default: 60000)")
    p.add_argument("--result-ttl", type=options.positive_float, default=600.0,
                   help="seconds a finished round waits for its fetch (default: 600)")
    p.add_argument("--state-dir",
                   help="keep a durable journal of round outcomes here (opened, unmasking "
                        "started, released/aborted, delivered; fsync'd, compacted), so "
                        "GetOutcome still answers after a restart (default: none; a restart "
                        "forgets every round); only its last folder is made, its parent must "
                        "exist")
    options.add_outcome_options(p)
    options.add_stream_cap_option(p, options.AGGREGATOR_STREAMS_PER_CONNECTION)
    p.add_argument("--max-unopened-sessions", type=options.positive_int, default=1 << 17,
                   help="session streams whose device has not sent its open yet, held at "
                        "once (default: 131072; one more is refused UNAVAILABLE, and devices "
                        "retry it)")
    p.add_argument("--upload-idle-ms", type=options.positive_int, default=5000,
                   help="cut off an upload whose next message takes longer (default: 5000)")
    p.add_argument("--upload-min-rate", type=options.positive_int, default=64 << 10,
                   help="bytes/s an upload must sustain after --upload-idle-ms of grace "
                        "(default: 65536)")


def run(args: argparse.Namespace) -> int:
    from fedhh_aggregator.main import run as run_service  # imports grpc: only when serving

    options.check_web_options(args)
    return run_service(args)
