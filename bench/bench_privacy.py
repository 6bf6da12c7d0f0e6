"""Benchmark of the privacy accounting: solve times, `fedhh privacy` wall time, and tables.

Measured:

* solves of the default ("sum") accountant at (eps_agg, delta, T) = (1, 1e-6, 4) for
  n = 1.6M, 50k, 1,400 and 200 contributors per round, and of the "clones" shuffle bound at
  n = 1.6M: wall time of a warm solve (imports done; best and median of 3), the answer and the
  number of accountant evaluations;
* `fedhh privacy ...` as a user runs it (a fresh process each time): wall time, best and
  median of 5, for the default form at n = 1.6M, the forward map, a baseline and the
  central Gaussian;
* with ``--tables``: the tables of docs/privacy.md (eps_local by method, rounds and target;
  sampling rates; the central Gaussian).

Usage:
    .venv/bin/python bench/bench_privacy.py            # -> docs/benchmarks/privacy.md
    .venv/bin/python bench/bench_privacy.py --tables   # also the tables (a few minutes)
    .venv/bin/python bench/bench_privacy.py --quick    # fewer repeats, prints only
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "privacy.md"
FEDHH = Path(sys.executable).parent / "fedhh"
DELTA = 1e-6


def solve_rows(repeats: int) -> list[str]:
    from fedhh.privacy import solve_local_epsilon

    solve_local_epsilon(1.0, DELTA, 4, 10_000)  # imports and caches of unrelated points
    rows = ["| method | n | eps_local | evaluations | best (s) | median (s) |",
            "| --- | --- | --- | --- | --- | --- |"]
    cases = [("sum", 1_600_000), ("sum", 50_000), ("sum", 1_400), ("sum", 200),
             ("clones", 1_600_000)]
    for method, n in cases:
        times = []
        for _ in range(repeats):
            from fedhh.privacy import clones, sum_pld

            sum_pld.coordinate_profile.cache_clear()
            sum_pld.round_pld.cache_clear()
            clones.reduction.cache_clear()
            start = time.perf_counter()
            sol = solve_local_epsilon(1.0, DELTA, 4, n, method=method)
            times.append(time.perf_counter() - start)
        rows.append(f"| {method} | {n:,} | {sol.eps_local:.3f} | {sol.evaluations} | "
                    f"{min(times):.2f} | {statistics.median(times):.2f} |")
        print(rows[-1], flush=True)
    return rows


CLI_CASES = [
    ["privacy", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4", "--devices", "1600000"],
    ["privacy", "amplify", "--eps-local", "8.47", "--delta", "1e-6", "--rounds", "4",
     "--devices", "1600000", "--method", "sum"],
    ["privacy", "triehh", "--theta", "10", "--eps-agg", "1", "--delta", "1e-6", "--rounds",
     "4", "--devices", "1600000"],
    ["privacy", "central-gaussian", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4"],
]


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process."""
    cpu, start = _child_cpu(), time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start, _child_cpu() - cpu


def cli_rows(repeats: int) -> list[str]:
    rows = ["| command | wall best (s) | wall median (s) | CPU best (s) |",
            "| --- | --- | --- | --- |"]
    cases = [(f"`fedhh {' '.join(argv)}`", [str(FEDHH), *argv]) for argv in CLI_CASES]
    cases += [(f"(python -c 'import {m}')", [sys.executable, "-c", f"import {m}"])
              for m in ("numpy", "scipy.stats", "dp_accounting")]
    for label, argv in cases:
        runs = [_timed(argv) for _ in range(repeats)]
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        rows.append(f"| {label} | {min(walls):.2f} | {statistics.median(walls):.2f} | "
                    f"{min(cpus):.2f} |")
        print(rows[-1], flush=True)
    return rows


def table_rows() -> list[str]:
    from fedhh.privacy import aggregate_epsilon, central_gaussian_sigma, solve_local_epsilon

    out: list[str] = []
    for method in ("sum", "clones", "paper"):
        out += [f"**{method}** (n = 1.6e6, delta = 1e-6)", "",
                "| eps_agg | T=1 | T=2 | T=3 | T=4 | T=5 | T=6 |", "|---|---|---|---|---|---|---|"]
        for eps_agg in (0.25, 0.5, 1.0):
            solved = [solve_local_epsilon(eps_agg, DELTA, t, 1_600_000, method=method)
                      for t in range(1, 7)]
            cells = [f"{sol.eps_local:.3f}" for sol in solved]
            out.append(f"| {eps_agg} | " + " | ".join(cells) + " |")
            print(out[-1], flush=True)
        out.append("")
    out += ["**Contributors** (eps_agg = 1, delta = 1e-6, T = 4)", "",
            "| n | sum | clones | eps_agg of sum at the clones value |", "|---|---|---|---|"]
    for n in (200, 1_400, 10_000, 50_000, 200_000, 1_600_000, 10_000_000):
        s = solve_local_epsilon(1.0, DELTA, 4, n).eps_local
        c = solve_local_epsilon(1.0, DELTA, 4, n, method="clones").eps_local
        back = aggregate_epsilon(c, DELTA, 4, n).eps_agg
        out.append(f"| {n:,} | {s:.3f} | {c:.3f} | {back:.3f} |")
        print(out[-1], flush=True)
    out += ["", "**Sampling rate** (eps_agg = 1, delta = 1e-6, T = 4, N = 1.6e6; m = q N)", "",
            "| q | 0.1 | 0.2 | 0.3 | 0.4 | 0.5 | 0.6 | 0.7 | 0.8 | 0.9 | 1.0 |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    rates = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    for method in ("sum", "clones", "paper"):
        cells = [f"{solve_local_epsilon(1.0, DELTA, 4, 1_600_000, q, method).eps_local:.3f}"
                 for q in rates]
        out.append(f"| {method} | " + " | ".join(cells) + " |")
        print(out[-1], flush=True)
    out += ["", "**Each path of the shuffle methods alone** (eps_agg = 1, n = 1.6e6)", "",
            "| path | T=1 | T=2 | T=3 | T=4 | T=5 | T=6 |", "|---|---|---|---|---|---|---|"]
    for method in ("clones", "paper"):
        for path in ("rdp_epsilon", "advanced_epsilon"):
            cells = [f"{path_only(method, path, t):.3f}" for t in range(1, 7)]
            label = "RDP only" if path == "rdp_epsilon" else "KOV only"
            out.append(f"| {method}, {label} | " + " | ".join(cells) + " |")
            print(out[-1], flush=True)
    out += ["", "**Central Gaussian** (sigma per coordinate per round, sensitivity 1)", "",
            "| eps_agg | T=1 | T=2 | T=4 | T=8 | T=12 |", "|---|---|---|---|---|---|"]
    for eps_agg in (0.5, 1.0, 2.0):
        cells = [f"{central_gaussian_sigma(eps_agg, DELTA, t):.3f}" for t in (1, 2, 4, 8, 12)]
        out.append(f"| {eps_agg} | " + " | ".join(cells) + " |")
    return out


def path_only(method: str, path: str, rounds: int) -> float:
    """Largest eps_local (to 1e-3) whose ``path`` alone meets eps_agg = 1 (bisection)."""
    from fedhh.privacy import aggregate_epsilon

    def value(x: float) -> float:
        return float(getattr(aggregate_epsilon(x, DELTA, rounds, 1_600_000, 1.0, method), path))

    lo, hi = 1.0, 16.0
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if value(mid) <= 1.0 else (lo, mid)
    return lo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tables", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    repeats = 1 if args.quick else 3
    load = os.getloadavg()
    lines = [
        "# Privacy accounting benchmark",
        "",
        f"Command: `.venv/bin/python bench/bench_privacy.py{' --tables' if args.tables else ''}`"
        f" ({dt.date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average {load[0]:.1f} at the start: the machine "
        "is shared, so the best of the repeats is the figure to compare).",
        "",
        "## Warm solves (imports done): (eps_agg, delta, T) = (1, 1e-6, 4)",
        "",
        *solve_rows(repeats),
        "",
        "## `fedhh privacy` as a user runs it (fresh process, imports included)",
        "",
        "CPU = user + system time of the process: on an idle core the wall time is about this.",
        "",
        *cli_rows(1 if args.quick else 5),
    ]
    if args.tables:
        lines += ["", "## Tables (docs/privacy.md)", "", *table_rows()]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
