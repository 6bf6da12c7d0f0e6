"""`fedhh loadtest`: drive the real services with N devices across several processes and report
per-call latency percentiles, round wall time, bytes per device and each service's CPU time and
peak memory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fedhh.cli import options


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("loadtest", help="load-test the real services", description=__doc__)
    p.add_argument("--devices", type=options.positive_int, required=True,
                   help="simulated devices, every one in every round")
    p.add_argument("--dim", type=options.positive_int, default=1 << 16,
                   help="dimension of a round's vectors (a power of two; default 2^16)")
    p.add_argument("--drop-rate", "--dropout", dest="dropout", metavar="RATE",
                   type=options.drop_rate,
                   default=0.0,
                   help="fraction of devices that drop out, at random stages (default 0; the "
                        "devices' --drop-rate; --dropout is its former name here). The run's "
                        "expected_dropout, what (k, t) is chosen for, follows it")
    p.add_argument("--rounds", type=options.positive_int, default=1,
                   help="secure-aggregation rounds to run (default 1)")
    p.add_argument("--processes", type=options.positive_int, default=None,
                   help="device processes (default: one per core; more only add contention "
                        "with the services under test: 1000 devices on 2 cores took 11.6 s a "
                        "round with 2 processes, 12.6 s with 6)")
    p.add_argument("--stage-ms", type=options.positive_int, default=None,
                   help="secure-aggregation stage window, each stage's default (default: 30 s "
                        "+ 10 ms per device; with the quiet close it is only an upper bound)")
    for stage in ("advertise", "share-keys", "masked-input", "consistency", "unmask"):
        p.add_argument(f"--{stage}-ms", type=options.positive_int, default=0,
                       help=f"window of the {stage.replace('-', ' ')} stage (default: --stage-ms)")
    p.add_argument("--quiet-close-ms", type=options.non_negative_int, default=None,
                   help="the aggregator closes a stage once n_min devices answered and none for "
                        "this long (default: 250 ms + 1.2 ms per device; 0: off, a stage that "
                        "lost a device waits for its deadline)")
    p.add_argument("--checkin-ms", type=options.positive_int, default=120_000,
                   help="longest a round's check-in stays open (default 120000)")
    p.add_argument("--quiet-close-tail", type=options.non_negative_float, default=None,
                   help="the aggregators' --quiet-close-tail: silence closes a stage only while "
                        "at most four times this share of its devices is missing (default: "
                        "theirs)")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--shard-size", type=options.positive_int, default=None,
                       help="split each round into shards of this many devices (at least), "
                            "each its own secure aggregation: the run setting shard_size "
                            "(default: one shard)")
    split.add_argument("--shards", type=options.positive_int, default=None,
                       help="the same, as a number of shards of devices/shards devices each "
                            "(the former form)")
    p.add_argument("--workers", type=options.positive_int, default=1,
                   help="worker aggregators behind a combiner (default 1; with --shards 1 and "
                        "--workers 1 the single aggregator of an unsharded system)")
    p.add_argument("--coordinators", type=options.positive_int, default=1,
                   help="device-facing processes: with N > 1, N selectors (fedhh selector) "
                        "serve the devices, spread over them, for the one coordinator, which "
                        "draws the cohorts and signs the tasks (default 1: the coordinator "
                        "alone)")
    p.add_argument("--seed", type=options.non_negative_int,
                   help="test mode: seed the devices' randomness and dropout draws (never in "
                        "a deployment: a known seed voids the local privacy guarantee)")
    p.add_argument("--workdir", help="keep logs and stats here (only the last folder of "
                   "the path is made)")
    p.add_argument("--json", metavar="PATH",
                   help="write the report as JSON (-: to standard output, the table to standard "
                        "error)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fedhh.cli.main import interrupt_once
    from fedhh.rpc.loadtest import LoadSpec, render, run_load

    options.check_output("--json", args.json)
    windows = (args.advertise_ms, args.share_keys_ms, args.masked_input_ms, args.consistency_ms,
               args.unmask_ms)
    shards = args.shards or (max(1, args.devices // args.shard_size) if args.shard_size
                             else 1)
    spec = LoadSpec(args.devices, args.dim, args.dropout, args.rounds, args.processes,
                    args.stage_ms, args.quiet_close_ms, windows=windows, seed=args.seed,
                    shards=shards, workers=args.workers,
                    quiet_close_tail=args.quiet_close_tail, checkin_ms=args.checkin_ms,
                    coordinators=args.coordinators)
    check_limits(spec)
    check_cohort(spec)
    interrupt_once()
    report = run_load(spec, Path(args.workdir) if args.workdir else None)
    # (on standard error when standard output holds the JSON)
    print(render(report), file=sys.stderr if args.json == options.STDOUT else sys.stdout)
    if args.json:
        options.write_output("--json", args.json, json.dumps(report, indent=2) + "\n")
    return 0 if report["state"] == "done" else 1


def check_limits(spec: Any) -> None:
    """Refuse, before anything starts, what the run a load test starts cannot have, naming this
    command's option: `--devices 100000000` drew its devices' data for minutes (growing
    gigabytes) before anything was refused, and `--rounds 100000` or `--dim 2^40` were refused
    by the coordinator as "INVALID_ARGUMENT: rounds must be at most 1024" once every service
    and device was up."""
    from fedhh.config import MAX_DEVICES, MAX_ROUNDS
    from fedhh.errors import ConfigError
    from fedhh.secagg.config import MAX_DIMENSION

    for flag, value, top, why in (
            ("--devices", spec.devices, MAX_DEVICES, "a run's target_devices"),
            ("--rounds", spec.rounds, MAX_ROUNDS, "a run's rounds"),
            ("--dim", spec.dim, MAX_DIMENSION, "secure aggregation's vector length")):
        if value > top:
            raise ConfigError(f"{flag} {value}: at most {top:,} ({why} can be no more)")


def check_cohort(spec: Any) -> None:
    """Refuse, before any service starts, a cohort (a shard's devices when sharded) that
    SecAgg+ has no lying-server (k, t) for at the run's expected dropout (the --drop-rate, at
    least 5%) and corrupt fraction, naming this command's options: the coordinator refused it
    once the services and devices were up, as "a cohort of 10 devices cannot run secure
    aggregation: ...; use more devices, or a lower expected_dropout or corrupt_fraction", two
    settings a load test does not have."""
    from fedhh.config import RunConfig
    from fedhh.errors import ConfigError
    from fedhh.secagg import DEVICES_CHECK, SecAggConfigError, Threat, choose_parameters

    dropout = max(spec.dropout, 0.05)  # (the run's expected_dropout, as run_load sets it)
    try:
        choose_parameters(spec.cohort, dropout, RunConfig.corrupt_fraction, Threat.LYING,
                          devices=DEVICES_CHECK)
    except SecAggConfigError as error:
        where = (f"{spec.devices} devices in {spec.shards} shards make shards of {spec.cohort}"
                 if spec.sharded else f"--devices {spec.devices}")
        more = ["more --devices"] + (["fewer --shards (or a larger --shard-size)"]
                                     if spec.sharded else [])
        if spec.dropout > 0.05:
            more.append("a lower --drop-rate")
        raise ConfigError(f"{where}: a cohort of {spec.cohort} cannot run secure aggregation "
                          f"({error}): give {', or '.join(more)}") from None
