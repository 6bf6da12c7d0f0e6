"""Benchmark of the SecAgg+ server's stage checks at shard scale: what an aggregator worker
computes after accepted messages to decide whether a quiet spell may close the open stage.

Two checks walk every device's neighbours: the t-core of the devices that shared keys
(``NeighbourGraph.core``: who could still have t share holders) and, from masked input on, the
first secret with fewer than t holders among the survivors (``_ShareHolders.first_short``).
Each is timed as the server computes it (numpy gathers) and as a walk of the definition over
Python sets (how the server computed it before, kept here as the reference, and checked equal).
Parameters: the coordinator's lying-server (k, t) for n at 10% expected dropout, 3% of the
devices missing.

Usage:
    .venv/bin/python bench/bench_stage_checks.py   # -> docs/benchmarks/secagg-stage-checks.md
"""

from __future__ import annotations

import random
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedhh.secagg.graph import NeighbourGraph  # noqa: E402
from fedhh.secagg.params import Threat, choose_parameters  # noqa: E402
from fedhh.secagg.server import _ShareHolders  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "secagg-stage-checks.md"
SIZES = (1_000, 6_137, 20_000)
MISSING = 0.03


def _seconds(call: Callable[..., object], *args: object, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _walked_core(graph: NeighbourGraph, members: set[int], t: int) -> set[int]:
    while True:
        weak = {u for u in members if sum(v in members for v in graph.neighbours(u)) < t}
        if not weak:
            return members
        members = members - weak


def _walked_first_short(partners: dict[int, tuple[int, ...]], holders: set[int], t: int
                        ) -> tuple[int, int] | None:
    for u, mine in partners.items():
        count = sum(v in holders for v in mine)
        if count < t:
            return u, count
    return None


def measure(n: int, rng: random.Random) -> tuple[int, int, int, float, float, float, float]:
    params = choose_parameters(n, 0.10, 0.05, Threat.LYING)
    k, t = params.k, params.t
    graph = NeighbourGraph(secrets.token_bytes(32), n, k)
    members = set(rng.sample(range(1, n + 1), round((1 - MISSING) * n)))
    core = graph.core(members, t)
    assert core == _walked_core(graph, set(members), t)
    partners = {v: tuple(w for w in graph.neighbours(v) if w in core) for v in sorted(core)}
    table = _ShareHolders(partners, {v: np.arange(1, len(p) + 1) for v, p in partners.items()},
                          n)
    survivors = set(rng.sample(sorted(core), round((1 - MISSING) * len(core))))
    assert table.first_short(survivors, t) == _walked_first_short(partners, survivors, t)
    return (n, k, t, _seconds(graph.core, members, t),
            _seconds(lambda: _walked_core(graph, set(members), t)),
            _seconds(table.first_short, survivors, t),
            _seconds(_walked_first_short, partners, survivors, t))


def main() -> int:
    rng = random.Random(0)
    rows = []
    for n in SIZES:
        row = measure(n, rng)
        rows.append(row)
        print(f"n={n} k={row[1]} t={row[2]}: core {row[3] * 1e3:.2f} ms (walk "
              f"{row[4] * 1e3:.1f} ms), holders {row[5] * 1e3:.2f} ms (walk {row[6] * 1e3:.1f} "
              "ms)", flush=True)
    lines = ["# SecAgg+ stage checks at shard scale", "",
             "Command: `.venv/bin/python bench/bench_stage_checks.py` (median of 5 calls each; "
             f"{MISSING:.0%} of the devices missing; lying-server (k, t) at 10% dropout).", "",
             "| n | k | t | t-core (numpy) | t-core (Python walk) | short secret (numpy) | "
             "short secret (Python walk) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {n:,} | {k} | {t} | {a * 1e3:.2f} ms | {b * 1e3:.1f} ms | {c * 1e3:.2f} ms | "
              f"{d * 1e3:.1f} ms |" for n, k, t, a, b, c, d in rows]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
