"""Benchmark: `fedhh experiments` serial against a Dask LocalCluster (issue 32).

Runs one study from an empty result store, alternating the serial path (no Dask) and
``--workers N``, each repeat in a fresh store and report folder, and reports the wall time of
each invocation (Dask's start and stop included) and the sum of the runs' own wall times
(report.json's ``runs_s``). An untimed serial invocation with one seed first builds the dataset
and the caches beside it.

    .venv/bin/python bench/bench_experiments_dask.py
    .venv/bin/python bench/bench_experiments_dask.py --study segmentation --seeds 3 \\
        --dataset synthetic-reddit-small --workers 2 --repeat 2

Results are printed and written to docs/benchmarks/experiments-dask.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "experiments-dask.md"
FEDHH = ROOT / ".venv" / "bin" / "fedhh"


def invocation(args: argparse.Namespace, scratch: Path, tag: str, dask: bool
               ) -> tuple[list[str], float, float]:
    """One invocation from an empty store: its command, wall time and the runs' summed wall."""
    out = scratch / f"out-{tag}"
    argv = [str(FEDHH), "experiments", args.study, "--dataset", args.dataset, "--seeds",
            str(args.seeds), "--store", str(scratch / f"store-{tag}"), "--out", str(out),
            "--quiet", *(["--workers", str(args.workers)] if dask else [])]
    started = time.perf_counter()
    subprocess.run(argv, check=True)
    wall = time.perf_counter() - started
    runs_s = float(json.loads((out / "report.json").read_text())["timings"]["runs_s"])
    return argv, wall, runs_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="segmentation")
    parser.add_argument("--dataset", default="synthetic-reddit-small")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    rows: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    commands: dict[bool, list[str]] = {}
    load: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as tmp:
        # Untimed: builds the dataset and the caches beside it (ground truth, codes) once.
        invocation(argparse.Namespace(**{**vars(args), "seeds": 1}), Path(tmp), "warm", False)
        for repeat in range(args.repeat):
            for dask in (False, True):
                load.append(os.getloadavg()[0])
                argv, wall, runs_s = invocation(args, Path(tmp), f"{repeat}-{dask}", dask)
                commands[dask] = argv
                rows[dask].append((wall, runs_s))
                print(f"{'dask' if dask else 'serial'} #{repeat + 1}: {wall:.1f} s wall, "
                      f"runs {runs_s:.1f} s", flush=True)
    serial = statistics.median(w for w, _ in rows[False])
    dask_wall = statistics.median(w for w, _ in rows[True])

    def command(argv: list[str]) -> str:
        shown = [Path(a).name if a == str(FEDHH) else a for a in argv]
        # TMP: the temporary folder; R: the repeat (each has its own store and report).
        return shlex.join([f"TMP/{Path(w).name.split('-')[0]}-R" if "bench-dask-" in w else w
                           for w in shown])

    lines = [
        "# `fedhh experiments`: serial against a Dask LocalCluster",
        "",
        f"Command: `.venv/bin/python bench/bench_experiments_dask.py --study {args.study} "
        f"--dataset {args.dataset} --seeds {args.seeds} --workers {args.workers} "
        f"--repeat {args.repeat}`, on this project's development machine "
        f" ({os.cpu_count()} cores; load average {min(load):.1f}-{max(load):.1f} "
        "before the invocations, the machine shared with other work). Each invocation starts "
        "from an empty result store, serial and Dask alternating:",
        "",
        f"- serial: `{command(commands[False])}` (TMP: a temporary folder; R: the repeat)",
        f"- Dask: `{command(commands[True])}`",
        "",
        "| invocation | wall (s) | sum of the runs' wall times (s) |",
        "| --- | --- | --- |",
    ]
    for dask_ in (False, True):
        for i, (wall, runs_s) in enumerate(rows[dask_]):
            name = f"--workers {args.workers}" if dask_ else "serial"
            lines.append(f"| {name} #{i + 1} | {wall:.1f} | {runs_s:.1f} |")
    lines += ["", f"Median wall: serial {serial:.1f} s, --workers {args.workers} "
              f"{dask_wall:.1f} s: speed-up {serial / dask_wall:.2f}x.", ""]
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
