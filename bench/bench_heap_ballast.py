"""One shard's SecAgg+ server CPU per device, alone and beside a grown heap, in one process.

A load-test worker's CPU per device grows with n though its calls per device are flat: the
same calls take longer (docs/benchmarks.md, "What grows with n at a worker" onwards). A
neighbour process's memory does not reproduce it. This asks whether the worker's OWN heap
does: one process replays a shard of N devices from the wire bytes a worker parses
(bench_shards_held's replay), no network, alone or with a ballast held beside it, CPU by
``time.thread_time``; every replay in a fresh process (a freed ballast leaves glibc's heap as
it left it), the kinds taking turns. The ballast is one of:

- ``objects``: ~SIZE of small Python objects (tuples of an int and a str), alive: pymalloc
  arenas, a larger working set for the caches (frozen out of the cycle collector's sight by
  the replay's tune_gc, as a worker's start-up objects are: the collector is not measured);
- ``blocks``: ~SIZE of 16-46 KiB bytes objects, alive: glibc's heap grown by chunks the size
  of a masked vector's, no holes;
- ``holes``: twice SIZE of the same blocks, every other one freed: glibc's free lists
  fragmented by 16-46 KiB holes (what a worker's freed stage leaves), SIZE held.

If a ballast costs the replay the extra a worker pays at 50,000 devices (~0.2 ms a device over
5,000's, workers' share), that part of the heap is the growth.

Usage:
    .venv/bin/python bench/bench_heap_ballast.py                       # 2,500 devices, 1 GiB
    .venv/bin/python bench/bench_heap_ballast.py --devices 1000 --repeats 3 --ballast holes
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_shards_held import record, replay  # noqa: E402
from reporting import publish, spread, take_turns  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "heap-ballast.md"
KINDS = ("none", "objects", "blocks", "holes")


def ballast(kind: str, size: int) -> list[Any]:
    """What ``kind`` leaves held: about ``size`` bytes (see the module's list)."""
    rng = random.Random(3)
    if kind == "none":
        return []
    if kind == "objects":
        # (a tuple, an int and a short str: ~130 bytes, three objects)
        return [(i, str(i)) for i in range(size // 130)]
    blocks: list[Any] = []
    made = 0
    target = size if kind == "blocks" else 2 * size
    while made < target:
        n = rng.randrange(16 << 10, 46 << 10)
        blocks.append(bytes(n))
        made += n
    if kind == "holes":
        del blocks[::2]
    return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=2500, help="devices in the shard (2500)")
    parser.add_argument("--size-mib", type=int, default=1024, help="ballast held (1024 MiB)")
    parser.add_argument("--ballast", default=",".join(KINDS),
                        help=f"kinds, taking turns ({','.join(KINDS)})")
    parser.add_argument("--repeats", type=int, default=3, help="turns of every kind (3)")
    parser.add_argument("--out", type=Path, default=OUT, help="report (docs/benchmarks/...)")
    parser.add_argument("--replay", nargs=2, metavar=("ANSWERS", "KIND"),
                        help=argparse.SUPPRESS)  # (one child run)
    args = parser.parse_args()
    kinds = args.ballast.split(",")
    for kind in kinds:
        if kind not in KINDS:
            raise SystemExit(f"--ballast: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if args.replay:
        with open(args.replay[0], "rb") as f:
            answers = pickle.load(f)  # (this benchmark's own scratch file)
        held = ballast(args.replay[1], args.size_mib << 20)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        row = replay(args.devices, 1, True, answers)
        row["faults"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) \
            / args.devices
        del held
        print(json.dumps(row))
        return
    start = time.perf_counter()
    answers = record(args.devices)
    made = time.perf_counter() - start
    runs = take_turns(answers, lambda scratch, kind: [
        __file__, "--devices", str(args.devices), "--size-mib", str(args.size_mib),
        "--replay", scratch, kind], kinds, args.repeats)
    parts = [p for p in runs[kinds[0]][0] if p not in ("total", "peak_mib", "faults")]
    lines = [f"bench_heap_ballast: one shard of {args.devices:,} devices replayed in one "
             f"process beside {args.size_mib:,} MiB of ballast, kinds taking turns, "
             f"{args.repeats} fresh processes each (answers made in {made:.0f} s); us of CPU per "
             "device (thread_time), median (min-max); minor page faults per device", "",
             "| ballast | total | " + " | ".join(parts) + " | faults |",
             "| --- | --- | " + " | ".join("---" for _ in parts) + " | --- |"]
    for kind in kinds:
        rows = runs[kind]
        lines.append(f"| {kind} | {spread([r['total'] for r in rows])} | "
                     + " | ".join(spread([r[p] for r in rows]) for p in parts)
                     + f" | {spread([r['faults'] for r in rows])} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
