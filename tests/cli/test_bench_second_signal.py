"""bench/bench_sharding.py stops on the first SIGTERM or Ctrl-C as `fedhh up` and `loadtest` do
(``fedhh.cli.main.interrupt_once``): later signals wait for the services' stop.

Before, it installed the old handler (every SIGINT and SIGTERM raised KeyboardInterrupt), so
timeout(1)'s second SIGTERM to the process group, or a second Ctrl-C, struck inside the load
test's clean-up and left its services running (72978e0 for `up` and `loadtest`)."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import fedhh.rpc.loadtest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_sharding.py"


def test_signals_after_the_first_do_not_interrupt_the_clean_up(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_sharding_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "RAW", tmp_path / "sharding.json")  # (nothing of docs/ written)
    monkeypatch.setattr(bench, "OUT", tmp_path / "sharding.md")
    monkeypatch.setattr(sys, "argv", ["bench_sharding.py", "--only", "10k"])
    cleaned: list[str] = []

    def fake_run_load(spec: Any, workdir: Any) -> dict[str, Any]:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # (the handler runs on the next bytecodes)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # (the interrupt ends this wait)
                time.sleep(0.01)
            raise AssertionError("the first SIGTERM did not interrupt")
        finally:
            # the clean-up the interrupt started (LocalTopology.__exit__ stopping services)
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            cleaned.append("services stopped")

    monkeypatch.setattr(fedhh.rpc.loadtest, "run_load", fake_run_load)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(KeyboardInterrupt):
            bench.main()
        assert cleaned == ["services stopped"]
        assert not (tmp_path / "sharding.md").exists()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
