"""bench/bench_web_device.py's page takes part in a run's attempt made again after an abort, as
a Python device does, and the bench reports the attempts that released. Before, the page's
devices stopped after ``--rounds`` tasks, one an attempt, so an aborted attempt left the last
run's later attempts without them (--total 120 --web 1: attempts 2-5 with 119 of 120 devices,
each aborting), and the bench took a device's first task, aborted or not, as its cold round."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_web_device.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_web_device_attempts", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _task(run_id: str, attempt: int, outcome: str, ms: float) -> dict[str, Any]:
    return {"runId": run_id, "round": 1, "attempt": attempt, "outcome": outcome,
            "contributed": outcome == "completed", "timings": {"report": ms}}


def _run(run_id: str, *states: str) -> SimpleNamespace:
    return SimpleNamespace(run_id=run_id, state="done", rounds=[
        SimpleNamespace(round=1, attempt=attempt, state=state)
        for attempt, state in enumerate(states, start=1)])


def test_the_page_checks_in_until_the_bench_stops_it() -> None:
    fleet = _bench()._fleet("127.0.0.1:7001", "127.0.0.1:7002", range(31, 33), ["a", "b"],
                            [["x"], ["y"]], [[1], [1]])
    assert fleet["untilStopped"] is True and "tasks" not in fleet
    assert fleet["coordinators"] == ["https://d31.devices.test:7001",
                                     "https://d32.devices.test:7001"]
    assert fleet["aggregators"] == ["https://d31.devices.test:7002",
                                    "https://d32.devices.test:7002"]


def test_an_attempt_made_again_is_waited_for_and_reported_not_the_aborted_one() -> None:
    bench = _bench()
    runs = [_run("bench-0", "aborted", "released"), _run("bench-1", "released")]
    released = bench._released_attempts(runs)
    assert released == {("bench-0", 1, 2), ("bench-1", 1, 1)}
    aborted = _task("bench-0", 1, "aborted", 90.0)
    first, second = _task("bench-0", 2, "completed", 50.0), _task("bench-1", 1, "completed", 9.0)
    # (the page's tasks so far: until each device has ended every released attempt's task,
    # the bench does not stop it)
    assert not bench._ended([[aborted, first], [aborted]], released)
    assert bench._ended([[aborted, first, second], [aborted, first, second]], released)
    own = bench._released_tasks([[aborted, first, second], [first, second]], released)
    assert own == [[first, second], [first, second]]
