"""Benchmark: waiters leaving an event in another order than they came (a selector's devices
whose waits for the check-in or for their round's end run out), asyncio.Event against
fedhh.rpc.crowd_event.CrowdEvent. Writes docs/benchmarks/crowd-event.md.

    .venv/bin/python bench/bench_crowd_event.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedhh.rpc.crowd_event import CrowdEvent  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "crowd-event.md"
SIZES = (2_500, 25_000)  # a selector's waiting devices at 5,000 and 50,000 devices


async def _leave_in_random_order(event: Any, n: int, seed: int) -> float:
    """us of CPU per waiter for n waiters, cancelled in a random order, to be gone."""
    waiters = [asyncio.create_task(event.wait()) for _ in range(n)]
    await asyncio.sleep(0)  # (each has begun its wait)
    random.Random(seed).shuffle(waiters)
    started = time.process_time()
    for waiter in waiters:
        waiter.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    return (time.process_time() - started) * 1e6 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for n in SIZES:
        for name, make in (("asyncio.Event", asyncio.Event), ("CrowdEvent", CrowdEvent)):
            runs = [asyncio.run(_leave_in_random_order(make(), n, seed))
                    for seed in range(args.repeats)]
            rows.append((n, name, statistics.median(runs), min(runs), max(runs)))
            print(f"{n:>6} waiters  {name:14s} {statistics.median(runs):8.1f} us per waiter "
                  f"(min {min(runs):.1f}, max {max(runs):.1f})")
    lines = ["# Waiters leaving an event in a random order", "",
             f"`.venv/bin/python bench/bench_crowd_event.py --repeats {args.repeats}`: us of CPU "
             "per waiter to cancel n waiters of one event in a random order and see them gone "
             "(the wait's own task included); median (min-max) of the repeats.", "",
             "| waiters | event | us per waiter |", "| --- | --- | --- |"]
    lines += [f"| {n:,} | {name} | {med:.1f} ({lo:.1f}-{hi:.1f}) |"
              for n, name, med, lo, hi in rows]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
