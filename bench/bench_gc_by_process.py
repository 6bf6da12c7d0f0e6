"""The cycle collector's time in each process kind of a load test, at several n.

Runs `fedhh loadtest` (issue 30's command: D = 4096, 10% dropout, 2 workers, 2 coordinators)
once per --devices value, in shards of --shard-size, with bench/gc_probe on PYTHONPATH, which
times every collection in every process (gc.callbacks, the thread's CPU clock). Prints, per
process kind (worker, combiner, coordinator, selector, devices), the collections made after
``fedhh.rpc.serving.tune_gc`` raised the youngest generation's threshold (those the run's
devices cause; the ones before are start-up's, the same at every n), by generation: how many,
their CPU in all and per device of the run, and the kind's peak RSS.

Usage:
    .venv/bin/python bench/bench_gc_by_process.py                  # 2,000, 10,000, 20,000
    .venv/bin/python bench/bench_gc_by_process.py --devices 5000 --shard-size 2500
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# CPython's own threshold: a collection made under it came before tune_gc
START_UP_THRESHOLD = 700
KINDS = {"aggregator": "worker", "device": "devices"}


def summarise(processes: list[dict], devices: int) -> dict[str, dict]:
    """Per process kind: the collections after start-up by generation ([count, CPU ms, us per
    device]), the start-up ones' CPU ms, the processes and the largest peak RSS (MiB)."""
    kinds: dict[str, dict] = defaultdict(lambda: {
        "processes": 0, "peak_mib": 0, "start_up_ms": 0.0,
        "round": defaultdict(lambda: [0, 0.0, 0.0])})
    for process in processes:
        argv = process["argv"]
        kind = KINDS.get(argv[1], argv[1]) if len(argv) > 1 else "?"
        figures = kinds[kind]
        figures["processes"] += 1
        figures["peak_mib"] = max(figures["peak_mib"], process["peak_rss_kib"] // 1024)
        for _wall, generation, cpu_ns, _collected, threshold in process["collections"]:
            if threshold == START_UP_THRESHOLD:
                figures["start_up_ms"] += cpu_ns / 1e6
                continue
            row = figures["round"][generation]
            row[0] += 1
            row[1] += cpu_ns / 1e6
            row[2] += cpu_ns / 1e3 / devices
    return {kind: {**figures, "round": dict(figures["round"])} for kind, figures in kinds.items()}


def run(devices: int, shard_size: int, workdir: Path) -> dict[str, dict]:
    probes = workdir / "gc"
    probes.mkdir(parents=True)
    path = os.pathsep.join([str(ROOT / "bench" / "gc_probe"),
                            *filter(None, [os.environ.get("PYTHONPATH")])])
    subprocess.run([sys.executable, "-m", "fedhh.cli.main", "loadtest", "--devices",
                    str(devices), "--dim", "4096", "--dropout", "0.1", "--shards",
                    str(max(1, devices // shard_size)), "--workers", "2", "--coordinators", "2",
                    "--workdir", str(workdir / "run"), "--json", str(workdir / "report.json")],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                   env={**os.environ, "GC_PROBE_DIR": str(probes), "PYTHONPATH": path})
    return summarise([json.loads(p.read_text()) for p in probes.glob("*.json")], devices)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="2000,10000,20000")
    parser.add_argument("--shard-size", type=int, default=1000)
    args = parser.parse_args()
    print("| devices | kind | processes | start-up ms | after start-up: gen (count, ms, us a "
          "device) | peak MiB |\n| --- | --- | --- | --- | --- | --- |")
    for devices in map(int, args.devices.split(",")):
        with tempfile.TemporaryDirectory() as scratch:
            kinds = run(devices, args.shard_size, Path(scratch))
        for kind, f in sorted(kinds.items()):
            collections = "; ".join(f"gen{g} {c}, {ms:.0f} ms, {us:.1f} us"
                                    for g, (c, ms, us) in sorted(f["round"].items())) or "none"
            print(f"| {devices:,} | {kind} | {f['processes']} | {f['start_up_ms']:.0f} | "
                  f"{collections} | {f['peak_mib']:,} |")


if __name__ == "__main__":
    main()
