"""Benchmark: sharded rounds on this machine (issue 17).

Runs `fedhh loadtest` with shards and workers and writes docs/benchmarks/sharding.md:

- 10,000 devices, D = 2^12, 10% dropout: one aggregator (unsharded, the baseline), two shards
  on one worker, two shards on two workers;
- the largest round: 50,000 devices, D = 2^12, 10% dropout, ten shards on two workers.

    .venv/bin/python bench/bench_sharding.py                  # all of them
    .venv/bin/python bench/bench_sharding.py --only 10k       # the 10,000-device runs
    .venv/bin/python bench/bench_sharding.py --only 50k --quiet-load 1.5

    .venv/bin/python bench/bench_sharding.py --render-only     # the page again from the JSON

Everything shares the machine's 2 cores (devices, coordinator, combiner, workers) and so may
other work: each run records how many cores other processes kept busy meanwhile, on average
(/proc/stat less the load test's own processes), and which other programs used the most CPU.
The per-device CPU costs of the largest sharded round that released (the workers', the
combiner's and the coordinator's) give the paper estimate of a round of 10^6 devices on N
machines (``estimate``), written to the same page.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "sharding.md"
RAW = ROOT / "docs" / "benchmarks" / "sharding.json"
sys.path.insert(0, str(ROOT))

# (group, label, LoadSpec fields). Stage windows are upper bounds: each stage closes once its
# live devices answered and then none for the quiet spell. The quiet close is allowed only while
# at most 8% of a stage's devices are missing (--quiet-close-tail 0.02; the aggregators'
# default allows 20%): with lying-server (k, t) (t ~ 2k/3) the pruning of devices with fewer
# than t share holders cascades to nothing once about a fifth of a shard is missing (k = 92,
# t = 61: see pruning_cliff), and on a starved machine a 20% tail is often only late, not gone.
TEN_K = dict(devices=10_000, dim=1 << 12, dropout=0.1, stage_ms=400_000, quiet_close_ms=10_000,
             quiet_close_tail=0.02)
CONFIGS: list[tuple[str, str, dict[str, Any]]] = [
    ("10k", "10,000 devices, 2 shards on 1 worker", dict(TEN_K, shards=2, workers=1)),
    ("10k", "10,000 devices, 2 shards on 2 workers", dict(TEN_K, shards=2, workers=2)),
    ("20k", "20,000 devices, 4 shards on 2 workers",
     dict(devices=20_000, dim=1 << 12, dropout=0.1, stage_ms=1_800_000, quiet_close_ms=15_000,
          quiet_close_tail=0.02, shards=4, workers=2, checkin_ms=600_000)),
    ("50k", "50,000 devices, 10 shards on 2 workers",
     dict(devices=50_000, dim=1 << 12, dropout=0.1, stage_ms=1_800_000, quiet_close_ms=15_000,
          quiet_close_tail=0.02, shards=10, workers=2, processes=8, checkin_ms=600_000)),
    ("10k", "10,000 devices, one aggregator (unsharded)", dict(TEN_K)),
]


def command(params: dict[str, Any]) -> str:
    flags = "".join(f" --{k.replace('_', '-')} {v}" for k, v in params.items()
                    if k not in ("devices", "dim", "dropout"))
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


class OtherWork(threading.Thread):
    """CPU seconds used meanwhile by every program that is not this benchmark or a process it
    started, by command line (the first 80 characters), from /proc."""

    def __init__(self, period_s: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.period_s = period_s
        self.used: dict[str, float] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._done = threading.Event()

    @staticmethod
    def _ours() -> set[int]:
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        ours, changed = {os.getpid()}, True
        while changed:
            found = {pid for pid, parent in parents.items() if parent in ours} - ours
            ours |= found
            changed = bool(found)
        return ours

    def _sample(self) -> None:
        ours, ticks = self._ours(), os.sysconf("SC_CLK_TCK")
        for stat in Path("/proc").glob("[0-9]*/stat"):
            pid = int(stat.parent.name)
            if pid in ours:
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / ticks
                raw = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").strip()
                name = raw.decode(errors="replace")[:80] or "?"
                before = self._last.get(pid)
                if before is not None:
                    self.used[name] = self.used.get(name, 0.0) + cpu - before[1]
                self._last[pid] = (name, cpu)

    def run(self) -> None:
        while not self._done.wait(self.period_s):
            self._sample()

    def stop(self) -> list[tuple[str, float]]:
        self._done.set()
        self.join()
        return sorted(((n, c) for n, c in self.used.items() if c >= 1.0),
                      key=lambda item: -item[1])[:6]


def estimate(row: dict[str, Any], devices: int = 10**6,
             machines: tuple[int, ...] = (1, 4, 16, 64), cores: int = 2) -> dict[str, Any]:
    """A paper estimate of one round of ``devices`` devices from the per-device CPU costs of a
    measured sharded round (``row``): W = cores x machines workers, one per core, with the
    shards spread evenly; the coordinator and the combiner are one process each (one core);
    the devices are phones, each doing its own protocol work in parallel.

    The round's wall time is bounded below by its busiest serial part: max(n a_coordinator,
    n a_combiner, n (a_workers + a_selectors) / W), where a_x is x's CPU per device in the
    measured round (the selectors, the device-facing tier, scale out beside the workers on the
    same cores; the devices' own work and the network's latency come on top). Per-device
    costs are CPU seconds, which sharing the machine inflates little (unlike wall time); they
    hold for the measured D, shard size and dropout, and grow with k (slowly with the shard
    size) and with D.
    """
    per = row["per_device_ms"]
    serial_s = {"coordinator": devices * per["coordinator"] / 1000,
                "combiner": devices * per["combiner"] / 1000}
    rounds = []
    for n_machines in machines:
        workers = n_machines * cores
        scaled = per["aggregation (all workers)"] + per.get("selectors (all)", 0.0)
        aggregation_s = devices * scaled / 1000 / workers
        bound = max(aggregation_s, *serial_s.values())
        rounds.append({"machines": n_machines, "workers": workers,
                       "aggregation_s": aggregation_s, "round_lower_bound_s": bound,
                       "bottleneck": max({"workers": aggregation_s, **serial_s}.items(),
                                         key=lambda item: item[1])[0]})
    return {"devices": devices, "from": row["label"], "per_device_ms": per,
            "serial_s": serial_s, "rounds": rounds}


def pruning_cliff(n: int = 5000, k: int = 92, t: int = 61,
                  presences: tuple[float, ...] = (0.9, 0.85, 0.82, 0.8, 0.79, 0.78, 0.75)
                  ) -> list[tuple[float, int, int]]:
    """(share of devices present, |U2| before, |U2| after) for the key-sharing close of one
    SecAgg+ instance with n devices and lying-server (k, t), each device present independently
    (seeded): the server prunes every device with fewer than t neighbours in U2, repeatedly
    (fedhh.secagg.server, ``_close_share_keys``); below a presence of about t/k plus a few
    standard deviations the pruning cascades to nothing."""
    import numpy as np

    from fedhh.secagg.graph import NeighbourGraph

    graph = NeighbourGraph(bytes(32), n, k)
    neighbours = {u: graph.neighbours(u) for u in range(1, n + 1)}
    rng = np.random.default_rng(0)
    rows = []
    for presence in presences:
        u2 = {u for u in range(1, n + 1) if rng.random() < presence}
        before = len(u2)
        weak = {u for u in u2 if sum(v in u2 for v in neighbours[u]) < t}
        while weak:
            u2 -= weak
            weak = {u for u in u2 if sum(v in u2 for v in neighbours[u]) < t}
        rows.append((presence, before, len(u2)))
    return rows


def summarise(label: str, params: dict[str, Any], report: dict[str, Any], other: float
              ) -> dict[str, Any]:
    released = [r for r in report["rounds"] if r["state"] == "released"]
    usage = report["usage"]
    run_cpu = {name: u.get("run_cpu_s", 0.0) for name, u in usage.items() if u}
    workers = {k: v for k, v in run_cpu.items() if k == "aggregator" or k.startswith("worker-")}
    selectors = sum(v for k, v in run_cpu.items() if k.startswith("selector-"))
    devices = params["devices"]
    return {
        "label": label, "command": command(params), "state": report["state"],
        "round_s": released[0]["seconds"] if released else None,
        "contributors": released[0]["participants"] if released else 0,
        "failed_devices": report["devices"]["failed"],
        "late_devices": report["devices"].get("late", 0), "other_cores": other,
        "cpu_s": run_cpu, "worker_cpu_s": workers,
        "per_device_ms": {
            "devices": 1000 * run_cpu.get("devices (all processes)", 0.0) / devices,
            "aggregation (all workers)": 1000 * sum(workers.values()) / devices,
            "selectors (all)": 1000 * selectors / devices,
            "combiner": 1000 * run_cpu.get("combiner", 0.0) / devices,
            "coordinator": 1000 * run_cpu.get("coordinator", 0.0) / devices},
        "peak_mib": {name: u.get("peak_mib", 0.0) for name, u in usage.items() if u},
        "wall_s": report["wall_s"],
    }


def render(rows: list[dict[str, Any]], texts: list[str], projection: dict[str, Any] | None
           ) -> str:
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
    lines += ["", "Other programs on the machine during each run (CPU s, the largest):", ""]
    for r in rows:
        others = "; ".join(f"`{name}` {cpu:.0f}" for name, cpu in r.get("other_programs", []))
        lines.append(f"- {r['label']}: {others or 'not recorded'}")
    if projection is not None:
        per = projection["per_device_ms"]
        lines += ["", f"## Estimate: one round of {projection['devices']:,} devices", "",
                  f"From the per-device CPU of \"{projection['from']}\": workers "
                  f"{per['aggregation (all workers)']:.2f} ms, combiner {per['combiner']:.3f} "
                  f"ms, coordinator {per['coordinator']:.2f} ms per device "
                  "(`bench_sharding.estimate`: one worker per core, shards spread evenly, the "
                  "coordinator and the combiner one process each; a lower bound on the round's "
                  "wall time, the devices' own work and the network on top).", "",
                  "| machines (2 cores) | workers | workers' share (s) | coordinator (s) | "
                  "combiner (s) | round >= (s) | bottleneck |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        serial = projection["serial_s"]
        for est in projection["rounds"]:
            lines.append(f"| {est['machines']} | {est['workers']} | "
                         f"{est['aggregation_s']:.0f} | {serial['coordinator']:.0f} | "
                         f"{serial['combiner']:.0f} | "
                         f"{est['round_lower_bound_s']:.0f} | {est['bottleneck']} |")
    lines += ["", "## The pruning cliff of the key-sharing close (n = 5000, k = 92, t = 61)", "",
              "Devices present when the stage closes, and U2 after the server prunes devices "
              "with fewer than t share holders (`bench_sharding.pruning_cliff`, seeded):", "",
              "| present | U2 before pruning | U2 after |", "| --- | --- | --- |"]
    lines += [f"| {share:.0%} | {before} | {after} |" for share, before, after in pruning_cliff()]
    for r, text in zip(rows, texts, strict=True):
        lines += ["", f"## {r['label']}", "", f"Command: `{r['command']}`", "", "```", text,
                  "```"]
    return "\n".join(lines) + "\n"


def largest_sharded(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sharded run with the most contributors that released (the estimate's source)."""
    done = [r for r in rows if r["round_s"] and r["combiner_ran"]]
    return max(done, key=lambda r: r["contributors"]) if done else None


def main() -> int:
    from fedhh.cli.main import interrupt_once
    from fedhh.errors import FedhhError
    from fedhh.rpc.loadtest import LoadSpec, run_load
    from fedhh.rpc.loadtest import render as render_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("10k", "20k", "50k"), help="one group of configurations")
    parser.add_argument("--quiet-load", type=float, default=None,
                        help="before each run, wait (up to 10 minutes) until the 1-minute load "
                             "average is below this")
    parser.add_argument("--render-only", action="store_true",
                        help="no runs: write the page again from the recorded JSON")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep each run's logs and state under this directory (one "
                             "subdirectory per configuration); default: a temporary one, "
                             "removed")
    args = parser.parse_args()
    # A killed benchmark stops the services it started, and a second signal (timeout(1)'s to
    # the process group, a second Ctrl-C) waits for that: `fedhh up` and `loadtest`'s handler.
    interrupt_once()
    previous = json.loads(RAW.read_text()) if RAW.exists() else {}
    results: dict[str, Any] = dict(previous)
    for group, label, params in CONFIGS:
        if args.render_only or (args.only and group != args.only):
            continue
        if args.quiet_load is not None:
            _wait_for_quiet(args.quiet_load, 600)
        before = _busy_seconds()
        others = OtherWork()
        others.start()
        try:
            workdir = (None if args.workdir is None
                       else args.workdir / re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-"))
            report = run_load(LoadSpec(**params), workdir)
        except FedhhError as error:  # a run that never ended: say so, go on with the next
            others.stop()
            print(f"{label}: {error}", flush=True)
            continue
        except KeyboardInterrupt:  # (the services are stopped; the runs before are in RAW)
            others.stop()
            raise
        ours = sum(u.get("cpu_s", 0.0) for u in report["usage"].values() if u)
        other = max(0.0, _busy_seconds() - before - ours) / report["wall_s"]
        text = render_report(report)
        print(text, flush=True)
        row = summarise(label, params, report, other)
        row["other_programs"] = others.stop()
        results[label] = {"row": row, "text": text}
        RAW.write_text(json.dumps(results, indent=2) + "\n")
    ordered = [results[label] for _, label, _ in CONFIGS if label in results]
    rows = [r["row"] for r in ordered]
    for row in rows:
        row.setdefault("combiner_ran", "combiner" in row["cpu_s"])
    source = largest_sharded(rows)
    projection = estimate(source) if source is not None else None
    if projection is not None:
        print(json.dumps(projection, indent=2))
    OUT.write_text(render(rows, [r["text"] for r in ordered], projection))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
