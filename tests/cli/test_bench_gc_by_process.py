"""bench/bench_gc_by_process.py's probe times the collections of a process that has it on
PYTHONPATH, and the summary counts those after tune_gc as the run's, apart from start-up's."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_gc_by_process.py"
# A process named as a worker is ("fedhh aggregator"): start-up collections under CPython's
# threshold, then tune_gc, then one full collection (the probe writes them as it exits).
CHILD = """
import gc
for _ in range(3):
    gc.collect(0)
from fedhh.rpc import serving
serving.tune_gc()
gc.collect()
"""


def test_the_probe_times_each_collection_and_the_summary_splits_off_start_up(
        tmp_path: Path) -> None:
    env = {**os.environ, "GC_PROBE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "bench" / "gc_probe"), str(ROOT)])}
    subprocess.run([sys.executable, "-c", CHILD, "aggregator"], check=True, env=env,
                   cwd=ROOT, timeout=120)
    spec = importlib.util.spec_from_file_location("bench_gc_by_process_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    processes = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    kinds = bench.summarise(processes, devices=10)
    assert list(kinds) == ["worker"]
    worker = kinds["worker"]
    assert worker["processes"] == 1 and worker["peak_mib"] > 0
    assert worker["start_up_ms"] > 0  # (the three explicit ones at least)
    assert list(worker["round"]) == [2]
    count, ms, us = worker["round"][2]
    assert count == 1 and us == pytest.approx(ms * 1000 / 10)
