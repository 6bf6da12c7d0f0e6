"""Suites of several clients on one Dask scheduler (fedhh/experiments/cluster.py): a run is a
task keyed by its store key, so two suites that plan the same run share its task. One suite's
Ctrl-C leaves the runs the other still waits for (its cancel was forced: the other suite's runs
were cancelled and it ended in a FutureCancelledError traceback, storing nothing), and a run
cancelled under a suite by another client is submitted again, then named in one line when it
is cancelled every time.

The runs go to an in-process LocalCluster (OS-chosen port, no dashboard) through ``_gated``:
the first run that reaches the worker computes at once, every other waits for ``GATE``, so the
runs a cancel should touch are still pending when it arrives."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fedhh.data.dataset import FederatedDataset
from fedhh.errors import FedhhError
from fedhh.experiments import ProgressEvent, ResultStore, Suite, SuiteSettings, get_study
from fedhh.experiments import cluster as cluster_module
from fedhh.experiments.cluster import code_fingerprint, execute

# The scheduler's HTTP routes (health, metrics) listen even without a dashboard, on
# 8787 unless told otherwise: a port of the OS's choice instead.
NO_HTTP = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


pytestmark = pytest.mark.slow

PATIENCE_S = 120.0  # every wait is for an event; this bounds it on a busy machine
GATE = threading.Event()
_calls = [0]
_calls_lock = threading.Lock()
_real_compute_run = cluster_module.compute_run


def _gated(settings: Any, run: Any, identity: Any, code: str) -> Any:
    """compute_run, on the in-process worker: the first call at once, the others once GATE is
    set. (A module-level function: Dask pickles it by reference, so the worker shares GATE.)"""
    with _calls_lock:
        _calls[0] += 1
        first = _calls[0] == 1
    if not first and not GATE.wait(PATIENCE_S):
        raise AssertionError(f"the test never opened the gate in {PATIENCE_S} s")
    return _real_compute_run(settings, run, identity, code)


def _cancels(dask_scheduler: Any, client: str) -> int:
    """How many cancels the scheduler has handled from ``client``."""
    return sum(1 for _, event in dask_scheduler.get_events(client)
               if isinstance(event, dict) and event.get("action") == "cancel")


def _await_cancels(client: Any, of: str, count: int) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while client.run_on_scheduler(_cancels, client=of) < count:
        assert time.monotonic() < deadline, f"the scheduler saw no cancel in {PATIENCE_S} s"
        time.sleep(0.02)


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    GATE.clear()
    _calls[0] = 0
    monkeypatch.setattr(cluster_module, "compute_run", _gated)
    try:
        yield
    finally:
        GATE.set()  # (a worker thread still waiting ends before the cluster closes)


@contextlib.contextmanager
def _clients() -> Iterator[tuple[Any, Any]]:
    """Two clients of one in-process LocalCluster of one single-threaded worker."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", scheduler_port=0, dashboard_address=None,
                      scheduler_kwargs=NO_HTTP) as cluster, \
            Client(cluster) as mine, Client(cluster.scheduler_address) as other:
        yield mine, other


def _suite(tiny_path: Path, tiny: FederatedDataset, store: Path) -> tuple[Suite, list[Any]]:
    """Two runs: segmentation's uniform one at seeds 0 and 1 (~0.2 s each). (Before, its
    adaptive and uniform runs at seed 0: the adaptive one, ~2 s of noise over a dimension of
    10^7, was most of each test's time, and what a cancel touches is the same.)"""
    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(store), tiny)
    plan = [run for run in suite.plan([get_study("segmentation")], [0, 1])
            if run.label == "uniform s=15"]
    assert len(plan) == 2
    return suite, plan


def test_a_suites_interrupt_leaves_the_runs_another_client_waits_for(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path, gated: None) -> None:
    suite, plan = _suite(tiny_path, tiny, tmp_path / "store")

    def interrupt(event: ProgressEvent) -> None:
        if event.kind == "done":
            raise KeyboardInterrupt

    with _clients() as (mine, other):
        # Another suite's client waits for the same runs (the same keys).
        theirs = [other.submit(_gated, suite.settings, run, tiny_identity(suite),
                               code_fingerprint(), key=f"fedhh-run-{run.key}") for run in plan]
        with pytest.raises(KeyboardInterrupt):
            execute(suite, plan, mine, interrupt)
        _await_cancels(other, mine.id, 1)
        GATE.set()
        records = other.gather(theirs, errors="raise")
    assert [r.key for r in records] == [run.key for run in plan]
    assert suite.computed == 1


def tiny_identity(suite: Suite) -> dict[str, Any]:
    return suite.data(suite.settings.dataset).identity


def test_a_run_cancelled_by_another_client_is_submitted_again(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path, gated: None,
        caplog: pytest.LogCaptureFixture) -> None:
    suite, plan = _suite(tiny_path, tiny, tmp_path / "store")
    with _clients() as (mine, other):
        from distributed import Future

        def cancel_the_rest(event: ProgressEvent) -> None:
            # Once the first run is back, another client forces a cancel of the others.
            if event.kind == "done" and suite.computed == 1:
                rest: list[Any] = [Future(f"fedhh-run-{run.key}", other) for run in plan
                        if run.key != event.run.key]
                other.cancel(rest, force=True)
                _await_cancels(other, other.id, 1)
                GATE.set()

        with caplog.at_level(logging.WARNING, logger=cluster_module.__name__):
            records = execute(suite, plan, mine, cancel_the_rest)
    assert sorted(records) == sorted(run.key for run in plan)
    store = suite.require_store()
    assert all(store.has(run.key) for run in plan)
    again = [r.getMessage() for r in caplog.records if "submitted again" in r.getMessage()]
    assert len(again) == len(plan) - 1, caplog.text
    assert "by another of its clients; submitted again" in again[0]


def test_a_run_cancelled_every_time_is_named_in_one_line(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path, gated: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "CANCELS_RESUBMITTED", 0)
    suite, plan = _suite(tiny_path, tiny, tmp_path / "store")
    with _clients() as (mine, other):
        from distributed import Future

        cancelled: list[Any] = []

        def cancel_the_rest(event: ProgressEvent) -> None:
            if event.kind == "done" and not cancelled:
                cancelled.extend(run for run in plan if run.key != event.run.key)
                other.cancel([Future(f"fedhh-run-{run.key}", other) for run in cancelled],
                             force=True)
                _await_cancels(other, other.id, 1)
                GATE.set()

        with pytest.raises(FedhhError) as error:
            execute(suite, plan, mine, cancel_the_rest)
        address = mine.scheduler.address
    first = min(cancelled, key=plan.index)
    # (told in the run's line; the suite's error counts the failed runs)
    assert str(error.value.__cause__) == (
        f"segmentation / {first.label} / seed {first.seed} was cancelled on the Dask scheduler "
        f"{address} by another of its clients each time it was sent (once): another suite or "
        "client stops the same runs (a run's task is shared by every client that submits its "
        "key); the runs that finished are stored")
    assert str(error.value).startswith(f"{len(cancelled)} of {len(plan)} runs failed")
    assert suite.computed == 1


def test_runs_cancelled_for_a_lost_scheduler_end_the_suite_though_the_client_reconnected(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path, gated: None) -> None:
    """A scheduler restarted at its address (a process manager) within the client's reconnect
    window: the client is running again when the suite reads its runs, cancelled for the lost
    connection. Before, only the client's state told a lost scheduler, and such a run was a
    failure that ended in a FutureCancelledError traceback."""
    suite, plan = _suite(tiny_path, tiny, tmp_path / "store")
    with _clients() as (mine, other):
        from distributed import Future

        def lose(event: ProgressEvent) -> None:
            if event.kind == "done":
                rest: list[Any] = [Future(f"fedhh-run-{run.key}", other) for run in plan
                        if run.key != event.run.key]
                # (Dask's reason for what it cancels when the connection drops)
                other.cancel(rest, force=True, reason=cluster_module.LOST_REASON)
                _await_cancels(other, other.id, 1)
                GATE.set()

        with pytest.raises(cluster_module.SchedulerLost) as lost:
            execute(suite, plan, mine, lose)
        address = mine.scheduler.address
    assert str(lost.value) == (
        f"lost the Dask scheduler {address}: 1 of the 2 runs sent finished and are stored; run "
        "the same command again to compute the other 1")
