"""`fedhh experiments` on Dask when its workers cannot keep a run (fedhh/experiments/cluster.py):
a run whose workers die each time Dask gives it one ends the suite with one line (WorkersDied:
how often, the last worker and its memory limit, what to change, what is stored), not with
Dask's KilledWorker traceback; a LocalCluster worker is never given less memory than its own
process needs (below that Dask restarted it the moment it started, for ever, without a word);
and the memory check says when not even one worker fits."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedhh.data.dataset import FederatedDataset
from fedhh.errors import ConfigError, DatasetError, FedhhError
from fedhh.experiments import ResultStore, Suite, SuiteSettings, get_study
from fedhh.experiments import cluster as cluster_module
from fedhh.experiments.cluster import (
    GIB,
    MIN_WORKER_MEMORY_GIB,
    ClusterOptions,
    SchedulerLost,
    WorkersDied,
    await_workers,
    check_scheduler,
    close_client,
    code_fingerprint,
    compute_run,
    execute,
    local_workers,
)

# The scheduler's HTTP routes (health, metrics) listen even without a dashboard, on
# 8787 unless told otherwise: a port of the OS's choice instead.
NO_HTTP = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


def test_a_local_cluster_worker_gets_at_least_what_its_process_needs() -> None:
    for gib in (0.01, 0.2, MIN_WORKER_MEMORY_GIB / 2):
        with pytest.raises(ConfigError, match=rf"--worker-memory {gib:g} GiB is less than a "
                                              r"worker process needs .* at least 0.5 GiB"):
            ClusterOptions(workers=1, worker_memory_gib=gib)
    assert ClusterOptions(workers=1, worker_memory_gib=MIN_WORKER_MEMORY_GIB).workers == 1
    # (the limit of a scheduler's workers is theirs: `dask worker --memory-limit`)
    ClusterOptions(scheduler="tcp://127.0.0.1:1", worker_memory_gib=0.01)


def test_the_memory_check_says_when_not_even_one_worker_fits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "machine", lambda: (8, 5.0))
    with pytest.raises(ConfigError, match=r"--workers 1 needs 1 x 4 GiB, this machine has 5.0 "
                                          r"GiB \(2 GiB kept for the rest\): not even one fits"):
        local_workers(ClusterOptions(workers=1))
    monkeypatch.setattr(cluster_module, "machine", lambda: (8, 10.5))
    with pytest.raises(ConfigError, match=r"needs 3 x 4 GiB, .*: at most 2$"):
        local_workers(ClusterOptions(workers=3))
    assert local_workers(ClusterOptions(workers=2)) == 2


@contextlib.contextmanager
def _cluster() -> Iterator[Any]:
    """A client of an in-process LocalCluster: its worker calls the function the client
    submits, the one the test put in place of compute_run."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address=None,
                      scheduler_kwargs=NO_HTTP) as cluster, \
            Client(cluster) as client:
        yield client


@dataclass(frozen=True)
class _Worker:
    """What KilledWorker names of the last worker that died (the scheduler's WorkerState)."""

    address: str
    memory_limit: int


def test_runs_whose_workers_died_end_the_suite_in_one_line_and_the_others_are_stored(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed.scheduler import KilledWorker

    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(tmp_path / "store"), tiny)
    plan = suite.plan([get_study("segmentation")], [0, 1])
    doomed = {plan[1].key, plan[2].key}
    real = cluster_module.compute_run

    def compute_run(settings: Any, run: Any, identity: Any, code: str) -> Any:
        # What the client gets when the workers given a run died 4 times (Dask's default
        # allowed-failures is 3): KilledWorker, as Dask raises it from the future.
        if run.key in doomed:
            raise KilledWorker(f"fedhh-run-{run.key}",
                               _Worker("tcp://10.0.0.7:4001", int(0.25 * GIB)), 3)
        return real(settings, run, identity, code)

    monkeypatch.setattr(cluster_module, "compute_run", compute_run)
    with _cluster() as client, pytest.raises(WorkersDied) as died:
        execute(suite, plan, client)
    names = [f"segmentation / {r.label} / seed {r.seed}" for r in plan if r.key in doomed]
    assert str(died.value) == (
        f"2 of the 4 runs sent never finished ({', '.join(names)}): the workers Dask gave each "
        "to died (4 times; the last: tcp://10.0.0.7:4001, memory limit 0.25 GiB). A worker "
        "dies when it is killed or its memory passes its limit (Dask restarts it): give the "
        "workers more memory (--worker-memory with --workers; `dask worker --memory-limit`, 4 "
        "GiB fits a run over the 1.6M-user default dataset). The 2 runs that finished are "
        "stored; run the same command again to compute the other 2"), str(died.value)
    store = suite.require_store()
    assert [store.has(r.key) for r in plan] == [r.key not in doomed for r in plan]

    # A run that raised its own error is raised as it is (a bug keeps its traceback).
    def broken(settings: Any, run: Any, identity: Any, code: str) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cluster_module, "compute_run", broken)
    with _cluster() as client, pytest.raises(ZeroDivisionError, match="a bug"):
        execute(suite, [r for r in plan if r.key in doomed], client)


def test_a_scheduler_host_that_does_not_exist_is_refused_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import socket
    import time

    calls: list[str] = []

    def resolver(errno: int, text: str) -> Any:
        async def open_connection(host: str, port: int) -> Any:
            calls.append(host)
            raise socket.gaierror(errno, text)
        return open_connection

    # The name server says there is no such host: one try, and the answer.
    monkeypatch.setattr(asyncio, "open_connection",
                        resolver(socket.EAI_NONAME, "Name or service not known"))
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"^cannot reach the Dask scheduler "
                       r"tcp://schedulr\.example:8786: there is no host named 'schedulr\.example' "
                       r"\(Name or service not known\)$"):
        check_scheduler("tcp://schedulr.example:8786", 30.0)
    assert calls == ["schedulr.example"]
    assert time.monotonic() - started < 10.0
    # A name server that fails for now may answer later: tried again until the bound.
    calls.clear()
    monkeypatch.setattr(asyncio, "open_connection",
                        resolver(socket.EAI_AGAIN, "Temporary failure in name resolution"))
    with pytest.raises(ConfigError, match=r"^cannot reach the Dask scheduler "
                       r"tcp://schedulr\.example:8786 within 0\.5 s: gaierror: "):
        check_scheduler("tcp://schedulr.example:8786", 0.5)
    assert len(calls) > 1


@pytest.mark.slow
def test_a_scheduler_lost_while_waiting_for_a_worker_is_said_to_be_lost() -> None:
    """Before: Dask's "Timed out trying to connect to ADDRESS after 30 s", as if the scheduler
    the suite had just connected to had never answered."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                           scheduler_port=0, dashboard_address=None, scheduler_kwargs=NO_HTTP)
    try:
        address = cluster.scheduler_address
        said: list[str] = []

        def say(line: str) -> None:  # told there is no worker: the scheduler goes away
            said.append(line)
            cluster.close()

        # (the client's timeout bounds its attempts to reconnect; closed as connect() closes
        # it: under load a lost client's close can trip asyncio's expiring Timeout)
        client = Client(address, timeout="3s")
        try:
            with pytest.raises(SchedulerLost) as lost:
                await_workers(client, address, 60.0, say)
        finally:
            close_client(client)
    finally:
        cluster.close()
    assert len(said) == 1
    assert str(lost.value).startswith(
        f"lost the Dask scheduler {address} while waiting for its first worker (")
    assert str(lost.value).endswith("): no run was sent; start the scheduler and its workers "
                                    "again, then run the same command")


class _ClientLosingItsScheduler:
    """A Dask client whose wait for a worker fails as a reconnect under load did: asyncio's
    "Cannot change state of expiring Timeout", the scheduler gone (status "connecting")."""

    def __init__(self, status: str) -> None:
        self.status = status

    def scheduler_info(self, n_workers: int) -> dict[str, Any]:
        return {"workers": {}}

    def wait_for_workers(self, n: int, timeout: float) -> None:
        raise RuntimeError("Cannot change state of expiring Timeout")


def test_an_internal_error_of_a_reconnect_is_a_lost_scheduler() -> None:
    """The suite under load (2026-12-05) failed the test above once with that RuntimeError,
    raised out of the client's reconnect instead of the connection error Dask gives alone."""
    client: Any = _ClientLosingItsScheduler("connecting")
    with pytest.raises(SchedulerLost, match="Cannot change state of expiring Timeout"):
        await_workers(client, "tcp://127.0.0.1:1", 1.0, lambda line: None)
    # (with the scheduler there, it is no lost scheduler: raised as it is)
    client.status = "running"
    with pytest.raises(RuntimeError, match="expiring Timeout"):
        await_workers(client, "tcp://127.0.0.1:1", 1.0, lambda line: None)


def test_a_worker_whose_cache_cannot_be_used_names_itself_and_its_cache(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the OS's "Not a directory: /x/cache" alone, a path on the worker's machine that
    read as the client's (whose cache was fine)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("FEDHH_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(cluster_module, "_SUITES", {})
    run = Suite(SuiteSettings(str(tiny_path)), None, tiny).plan([get_study("segmentation")],
                                                                [0])[0]
    settings = SuiteSettings("synthetic-reddit-small")
    with pytest.raises(DatasetError) as refused:
        compute_run(settings, dataclasses.replace(run, dataset=""), {}, code_fingerprint())
    assert str(refused.value).startswith(
        f"on this worker: cannot open the dataset 'synthetic-reddit-small' (the cache there: "
        f"{blocker / 'cache'}, FEDHH_CACHE): NotADirectoryError: ")


def test_runs_that_fail_with_the_same_error_are_told_once(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A worker that refuses every run (its cache unusable, the dataset missing there): before,
    a log line per run, the same words each time (191 for the paper's suite), and every run
    named in the last one. Its words are told once, in words (before, Dask's repr of the
    error in the run's line, then the same error raised again as the command's error)."""
    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(tmp_path / "store"), tiny)
    plan = suite.plan([get_study("segmentation")], [0, 1, 2, 3, 4])  # 10 runs
    refusal = "on worker tcp://10.0.0.7:4001: cannot open the dataset 'tiny'"

    def refused(settings: Any, run: Any, identity: Any, code: str) -> Any:
        raise DatasetError(refusal)

    monkeypatch.setattr(cluster_module, "compute_run", refused)
    with _cluster() as client, pytest.raises(FedhhError) as failed, \
            caplog.at_level("ERROR", logger=cluster_module.__name__):
        execute(suite, plan, client)
    lines = [r.getMessage() for r in caplog.records if r.name == cluster_module.__name__]
    assert len(lines) == 1, lines
    assert lines[0].endswith(f"failed: {refusal}")
    error = str(failed.value)
    assert error.startswith("10 of 10 runs failed (not stored; the next invocation retries "
                            "them; 9 with an error told above, not told again): ")
    assert error.endswith(" and 2 more")
    assert refusal not in error and isinstance(failed.value.__cause__, DatasetError)


def test_one_failed_run_is_told_in_its_line_and_counted_in_the_error(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A run that fails with fedhh's own error: its words once, after the run's name; the
    suite's error counts it and points there. A bug's error is raised as it is (its
    traceback), after the line that counts it."""
    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(tmp_path / "store"), tiny)
    plan = suite.plan([get_study("segmentation")], [0])
    refusal = "the dataset 'tiny' on this worker is another dataset"
    raised: list[Exception] = [DatasetError(refusal)]

    def one_refused(settings: Any, run: Any, identity: Any, code: str) -> Any:
        raise raised[0]

    monkeypatch.setattr(cluster_module, "compute_run", one_refused)
    with _cluster() as client, pytest.raises(FedhhError) as failed, \
            caplog.at_level("ERROR", logger=cluster_module.__name__):
        execute(suite, plan[1:], client)
    lines = [r.getMessage() for r in caplog.records if r.name == cluster_module.__name__]
    run = plan[1]
    assert lines == [f"{run.study} / {run.label} / seed {run.seed} failed: {refusal}"]
    assert str(failed.value) == (f"1 of 1 runs failed (not stored; the next invocation retries "
                                 f"them): {run.study} / {run.label} / seed {run.seed}; its "
                                 "error is told above")
    caplog.clear()
    raised[0] = ZeroDivisionError("a bug")
    with _cluster() as client, pytest.raises(ZeroDivisionError, match="a bug"), \
            caplog.at_level("ERROR", logger=cluster_module.__name__):
        execute(suite, plan[1:], client)
    lines = [r.getMessage() for r in caplog.records if r.name == cluster_module.__name__]
    assert lines[0].endswith("failed: ZeroDivisionError: a bug"), lines
    assert lines[1].startswith("1 of 1 runs failed"), lines


def test_the_runs_a_worker_refuses_go_to_the_other_workers(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """One worker whose dataset (or cache, or code) is not the client's: before, it failed
    each run it was given at once and took the next, so most of a suite failed on it while
    the other workers computed a few; now its runs go to the others, with one warning."""
    from distributed import Client, LocalCluster, get_worker

    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(tmp_path / "store"), tiny)
    plan = suite.plan([get_study("segmentation")], [0, 1])
    refusals: list[str] = []

    class _Computed:
        """Stands for a worker's suite: a record without a simulation (seconds saved)."""

        def compute(self, run: Any) -> Any:
            from fedhh.experiments.store import RunRecord

            return RunRecord(run.key, run.seed, [], run.command, {}, {
                name: np.zeros(0) for name in ResultStore.ARRAYS})

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address=None,
                      scheduler_kwargs=NO_HTTP) as cluster, Client(cluster) as client:
        bad = sorted(client.scheduler_info(n_workers=-1)["workers"])[0]

        def worker_suite(*args: Any) -> Any:
            if get_worker().address == bad:
                refusals.append(bad)
                raise DatasetError(f"on worker {bad}: dataset directory {tiny_path} does "
                                   "not exist")
            return _Computed()

        monkeypatch.setattr(cluster_module, "_worker_suite", worker_suite)
        with caplog.at_level("WARNING", logger=cluster_module.__name__):
            records = execute(suite, plan, client)
    assert sorted(records) == sorted(r.key for r in plan)
    store = suite.require_store()
    assert all(store.has(r.key) for r in plan)
    warned = [r.getMessage() for r in caplog.records if "refuses the runs" in r.getMessage()]
    assert len(warned) == (1 if refusals else 0), caplog.text
    if refusals:  # (the good worker may have been given every run: nothing to move then)
        assert warned[0].startswith(f"Dask worker {bad} refuses the runs, which go to the other "
                                    f"workers: DatasetError: on worker {bad}: dataset directory")


class _LostClientClosing:
    """A client that lost its scheduler (status "connecting") whose close trips asyncio's
    "Cannot change state of expiring Timeout", as Dask's did under load."""

    def __init__(self, address: str, timeout: str) -> None:
        self.status = "connecting"
        self.closed = 0

    def close(self) -> None:
        self.closed += 1
        raise RuntimeError("Cannot change state of expiring Timeout")


def test_a_lost_client_whose_close_fails_leaves_scheduler_lost_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the close's RuntimeError, raised from connect()'s ``finally``, stood in for the
    SchedulerLost that says what happened (a traceback for the user)."""
    import distributed

    monkeypatch.setattr(cluster_module, "check_scheduler", lambda *args: None)
    monkeypatch.setattr(distributed, "Client", _LostClientClosing)
    with pytest.raises(SchedulerLost, match=r"^lost"), \
            cluster_module.connect(ClusterOptions(scheduler="tcp://127.0.0.1:1")) as client:
        raise SchedulerLost("lost the Dask scheduler tcp://127.0.0.1:1")
    assert client.closed == 1


def test_a_running_client_whose_close_fails_raises() -> None:
    """Only a client that lost its scheduler is closed quietly: a running one's failure is a bug."""
    client = _LostClientClosing("tcp://127.0.0.1:1", "1s")
    client.status = "running"
    with pytest.raises(RuntimeError, match="expiring Timeout"):
        close_client(client)  # type: ignore[arg-type]
