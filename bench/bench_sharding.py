"""Benchmark: sharded rounds on this machine (issue 17).

Runs `fedhh loadtest` with shards and workers and writes docs/benchmarks/sharding.md:

- 10,000 devices, D = 2^12, 10% dropout: one aggregator (unsharded, the baseline), two shards
  on one worker, two shards on two workers;
- the largest round: 50,000 devices, D = 2^12, 10% dropout, ten shards on two workers.

    .venv/bin/python bench/bench_sharding.py                  # all of them
    .venv/bin/python bench/bench_sharding.py --only 10k       # the 10,000-device runs
    .venv/bin/python bench/bench_sharding.py --only 50k --quiet-load 1.5

Everything shares the machine's 2 cores (devices, coordinator, combiner, workers) and so may
other work: each run records how many cores other processes kept busy meanwhile, on average
(/proc/stat less the load test's own processes). Per-device costs (CPU seconds per device of
the devices, the workers, the combiner and the coordinator) feed the estimate for larger rounds
in docs/scaling.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "sharding.md"
RAW = ROOT / "docs" / "benchmarks" / "sharding.json"
sys.path.insert(0, str(ROOT))

# (group, label, LoadSpec fields). Stage windows are upper bounds: each stage closes once its
# live devices answered and then none for the quiet spell.
CONFIGS: list[tuple[str, str, dict[str, Any]]] = [
    ("10k", "10,000 devices, one aggregator (unsharded)",
     dict(devices=10_000, dim=1 << 12, dropout=0.1, stage_ms=400_000, quiet_close_ms=3000)),
    ("10k", "10,000 devices, 2 shards on 1 worker",
     dict(devices=10_000, dim=1 << 12, dropout=0.1, stage_ms=400_000, quiet_close_ms=3000,
          shards=2, workers=1)),
    ("10k", "10,000 devices, 2 shards on 2 workers",
     dict(devices=10_000, dim=1 << 12, dropout=0.1, stage_ms=400_000, quiet_close_ms=3000,
          shards=2, workers=2)),
    ("50k", "50,000 devices, 10 shards on 2 workers",
     dict(devices=50_000, dim=1 << 12, dropout=0.1, stage_ms=900_000, quiet_close_ms=5000,
          shards=10, workers=2, processes=8, checkin_ms=600_000)),
]


def command(params: dict[str, Any]) -> str:
    flags = "".join(f" --{k.replace('_', '-')} {v}" for k, v in params.items()
                    if k not in ("devices", "dim", "dropout", "checkin_ms"))
    return (f"fedhh loadtest --devices {params['devices']} --dim {params['dim']} "
            f"--dropout {params['dropout']}{flags}")


def _busy_seconds() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _wait_for_quiet(threshold: float, limit_s: float) -> None:
    until = time.monotonic() + limit_s
    while os.getloadavg()[0] >= threshold and time.monotonic() < until:
        time.sleep(10)  # polling the machine's load, not synchronising with anything


def summarise(label: str, params: dict[str, Any], report: dict[str, Any], other: float
              ) -> dict[str, Any]:
    released = [r for r in report["rounds"] if r["state"] == "released"]
    usage = report["usage"]
    run_cpu = {name: u.get("run_cpu_s", 0.0) for name, u in usage.items() if u}
    workers = {k: v for k, v in run_cpu.items() if k == "aggregator" or k.startswith("worker-")}
    devices = params["devices"]
    return {
        "label": label, "command": command(params), "state": report["state"],
        "round_s": released[0]["seconds"] if released else None,
        "contributors": released[0]["participants"] if released else 0,
        "failed_devices": report["devices"]["failed"], "other_cores": other,
        "cpu_s": run_cpu, "worker_cpu_s": workers,
        "per_device_ms": {
            "devices": 1000 * run_cpu.get("devices (all processes)", 0.0) / devices,
            "aggregation (all workers)": 1000 * sum(workers.values()) / devices,
            "combiner": 1000 * run_cpu.get("combiner", 0.0) / devices,
            "coordinator": 1000 * run_cpu.get("coordinator", 0.0) / devices},
        "peak_mib": {name: u.get("peak_mib", 0.0) for name, u in usage.items() if u},
        "wall_s": report["wall_s"],
    }


def render(rows: list[dict[str, Any]], texts: list[str]) -> str:
    lines = ["# Sharded rounds benchmark", "",
             f"Command: `.venv/bin/python bench/bench_sharding.py` ({time.strftime('%Y-%m-%d')}, "
             f"{platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}); every process (devices, coordinator, combiner, "
             "workers) shares the machine, over TLS on 127.0.0.1. 10% of the devices drop out, "
             "each at a random stage. Other work: the cores other processes on the machine "
             "kept busy during the run, on average.", "",
             "| configuration | round wall (s) | contributors | CPU s during the run: devices "
             "/ each worker / combiner / coordinator | other work (cores) |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        cpu = r["cpu_s"]
        workers = " + ".join(f"{v:.1f}" for v in r["worker_cpu_s"].values())
        wall = f"{r['round_s']:.1f}" if r["round_s"] else r["state"]
        lines.append(f"| {r['label']} | {wall} | {r['contributors']} | "
                     f"{cpu.get('devices (all processes)', 0):.1f} / {workers} / "
                     f"{cpu.get('combiner', 0):.2f} / {cpu.get('coordinator', 0):.1f} | "
                     f"{r['other_cores']:.2f} |")
    lines += ["", "Per device (CPU ms per device in the round):", "",
              "| configuration | devices | all workers | combiner | coordinator |",
              "| --- | --- | --- | --- | --- |"]
    for r in rows:
        p = r["per_device_ms"]
        lines.append(f"| {r['label']} | {p['devices']:.2f} | "
                     f"{p['aggregation (all workers)']:.2f} | {p['combiner']:.3f} | "
                     f"{p['coordinator']:.2f} |")
    for r, text in zip(rows, texts, strict=True):
        lines += ["", f"## {r['label']}", "", f"Command: `{r['command']}`", "", "```", text,
                  "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    from fedhh.rpc.loadtest import LoadSpec, run_load
    from fedhh.rpc.loadtest import render as render_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("10k", "50k"), help="one group of configurations")
    parser.add_argument("--quiet-load", type=float, default=None,
                        help="before each run, wait (up to 10 minutes) until the 1-minute load "
                             "average is below this")
    args = parser.parse_args()
    previous = json.loads(RAW.read_text()) if RAW.exists() else {}
    results: dict[str, Any] = dict(previous)
    for group, label, params in CONFIGS:
        if args.only and group != args.only:
            continue
        if args.quiet_load is not None:
            _wait_for_quiet(args.quiet_load, 600)
        before = _busy_seconds()
        report = run_load(LoadSpec(**params))
        ours = sum(u.get("cpu_s", 0.0) for u in report["usage"].values() if u)
        other = max(0.0, _busy_seconds() - before - ours) / report["wall_s"]
        text = render_report(report)
        print(text, flush=True)
        results[label] = {"row": summarise(label, params, report, other), "text": text}
        RAW.write_text(json.dumps(results, indent=2) + "\n")
    ordered = [results[label] for _, label, _ in CONFIGS if label in results]
    OUT.write_text(render([r["row"] for r in ordered], [r["text"] for r in ordered]))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
