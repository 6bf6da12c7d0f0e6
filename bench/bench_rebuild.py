"""Benchmark of the unmask stage's Shamir rebuilds at a worker: CPU per secret.

A shard of ``--secrets`` devices, each secret shared at the roster positions 1..k (k and t as
the coordinator picks them for the load test's shard of 2,500: the lying-server bound at 10%
expected dropout), whose holders answer with probability ``--answered`` in a random order.
Two ways to rebuild every secret, alternated ``--repeats`` times:

* before: each secret from the first t shares to arrive, through ``shamir.reconstruct`` as
  its t-th share arrives (the server before this benchmark);
* now: at the close of the stage, each secret from its t shares at the smallest points among
  those that answered, in batches through ``shamir.reconstruct_many`` (``SecAggServer``).

Shamir only: both read the same t share values as integers first, which is not timed. Every
rebuilt secret is checked against the one shared.

Usage:
    .venv/bin/python bench/bench_rebuild.py [--secrets 2500] [--answered 0.88] [--repeats 5]
        # -> docs/benchmarks/rebuild.md
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reporting import publish, spread  # noqa: E402

from fedhh.secagg import shamir  # noqa: E402
from fedhh.secagg.params import Threat, choose_parameters  # noqa: E402
from fedhh.secagg.server import REBUILD_BATCH  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "rebuild.md"


def shard(secrets: int, k: int, t: int, answered: float, seed: int
          ) -> tuple[list[int], list[list[tuple[int, int]]], list[list[tuple[int, int]]]]:
    """Each secret, its first t shares to arrive, and its t answered shares of smallest
    points (points ascending)."""
    rng = random.Random(seed)
    values: list[int] = []
    first: list[list[tuple[int, int]]] = []
    smallest: list[list[tuple[int, int]]] = []
    while len(values) < secrets:
        secret = rng.getrandbits(256)
        ys = shamir.share(secret, t, range(1, k + 1), rng.randbytes)
        arrived = [x for x in rng.sample(range(1, k + 1), k) if rng.random() < answered]
        if len(arrived) < t:
            continue  # (the stage would abort: too few shares)
        values.append(secret)
        first.append(sorted((x, ys[x - 1]) for x in arrived[:t]))
        smallest.append([(x, ys[x - 1]) for x in sorted(arrived)[:t]])
    return values, first, smallest


def one_by_one(rows: list[list[tuple[int, int]]]) -> list[int]:
    return [shamir.reconstruct(points) for points in rows]


def batched(rows: list[list[tuple[int, int]]]) -> list[int | None]:
    out: list[int | None] = []
    for start in range(0, len(rows), REBUILD_BATCH):
        part = rows[start:start + REBUILD_BATCH]
        xs = np.array([[x for x, _ in points] for points in part], dtype=np.int64)
        out += shamir.reconstruct_many(xs, [[y for _, y in points] for points in part])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets", type=int, default=2500)
    parser.add_argument("--answered", type=float, default=0.88)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    params = choose_parameters(2500, 0.10, 0.05, Threat.LYING)
    k, t = params.k, params.t
    secrets, first, smallest = shard(args.secrets, k, t, args.answered, seed=1)
    missing_first = statistics.mean(max(x for x, _ in r) - t for r in first)
    missing_smallest = statistics.mean(max(x for x, _ in r) - t for r in smallest)
    before: list[float] = []
    now: list[float] = []
    for _ in range(args.repeats):
        for times, rebuild, rows in ((before, one_by_one, first), (now, batched, smallest)):
            started = time.process_time()
            rebuilt = rebuild(rows)
            times.append((time.process_time() - started) / len(rows) * 1e6)
            if rebuilt != secrets:
                raise SystemExit(f"{rebuild.__name__} rebuilt other secrets")
    ratios = [b / n for b, n in zip(before, now, strict=True)]
    lines = [f"# The unmask stage's Shamir rebuilds ({len(secrets)} secrets, k = {k}, t = {t}, "
             f"{args.answered:.0%} of holders answering)", "",
             f"`.venv/bin/python bench/bench_rebuild.py` (CPU us per secret; median, min-max "
             f"of {args.repeats}, the two alternated)", "",
             "| rebuild | points missing below the largest used | us per secret |",
             "| --- | --- | --- |"]
    for label, missing, values in (
            ("first t shares to arrive, one by one (before)", missing_first, before),
            ("t smallest points at the close, in batches", missing_smallest, now)):
        lines.append(f"| {label} | {missing:.1f} | {spread(values)} |")
    lines += ["", f"Faster by {statistics.median(ratios):.2f}x (median of the pairs' ratios, "
                  f"{min(ratios):.2f}-{max(ratios):.2f})."]
    publish(lines, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
