"""`fedhh experiments` on Dask: a suite whose workers are all paused says so, and when one runs
again (fedhh/experiments/cluster.py, WorkerWatch and paused_workers).

Before: Dask pauses a worker whose memory passes 80% of its limit (its nanny restarts it only at
95%), and a fedhh worker keeps its dataset, ground truth and one encoded vocabulary between
runs, so a worker whose limit is too small for them stays paused. With every worker paused the
suite sat still with its progress bar for ever; the reason was in the workers' logs alone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from fedhh.data.dataset import FederatedDataset
from fedhh.experiments import ResultStore, Suite, SuiteSettings, get_study
from fedhh.experiments import cluster as cluster_module
from fedhh.experiments.cluster import GIB, WorkerWatch, execute, paused_workers

# The scheduler's HTTP routes (health, metrics) listen even without a dashboard, on
# 8787 unless told otherwise: a port of the OS's choice instead.
NO_HTTP = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


ADDRESS = "tcp://10.0.0.5:8786"
PAUSED = ["tcp://10.0.0.7:4001 (0.85 GiB of its 1.00 GiB limit)"]


def _watch(looks: list[tuple[int, list[str]]]) -> tuple[WorkerWatch, list[str]]:
    said: list[str] = []
    counts = iter([count for count, _ in looks])
    paused = iter([names for _, names in looks])
    return WorkerWatch(lambda: next(counts), said.append, ADDRESS, grace_s=10.0,
                       paused=lambda: next(paused)), said


def test_every_worker_paused_past_the_grace_is_said_once_then_their_return() -> None:
    watch, said = _watch([(1, []), (1, PAUSED), (1, PAUSED), (1, PAUSED), (1, PAUSED),
                          (2, PAUSED)])
    for now in (0.0, 1.0, 6.0):  # paused since t = 1, not yet 10 s
        watch.check(now)
    assert said == []
    watch.check(11.0)
    assert said == [
        f"every Dask worker of {ADDRESS} is paused (10 s): {PAUSED[0]}. Dask pauses a worker "
        "whose memory passes its pause threshold (80% of its limit by default), and a fedhh "
        "worker keeps its dataset between runs, so it may never resume: the runs not done "
        f"wait. Start workers with more memory (`dask worker {ADDRESS} --nthreads 1 "
        "--memory-limit 4GiB`; with --workers, --worker-memory); Ctrl-C stops here, and every "
        "finished run stays stored"]
    watch.check(30.0)  # still paused: said once
    assert len(said) == 1
    watch.check(31.0)  # a second worker joined, running
    assert said[1] == f"1 Dask worker of {ADDRESS} runs again: the runs go on"


def test_some_workers_running_or_a_short_pause_says_nothing() -> None:
    watch, said = _watch([(2, PAUSED)] * 3 + [(1, PAUSED), (1, []), (1, PAUSED)])
    for now in (0.0, 20.0, 40.0, 41.0, 45.0, 50.0):
        watch.check(now)
    assert said == []


def test_paused_workers_read_from_the_schedulers_identity() -> None:
    info: dict[str, Any] = {"workers": {
        "tcp://10.0.0.8:4002": {"status": "running", "memory_limit": GIB,
                                "metrics": {"memory": GIB // 2}},
        "tcp://10.0.0.7:4001": {"status": "paused", "memory_limit": GIB,
                                "metrics": {"memory": int(0.85 * GIB)}},
        "tcp://10.0.0.9:4003": {"status": "paused", "memory_limit": 0,
                                "metrics": {"memory": GIB}},
    }}
    assert paused_workers(info) == [PAUSED[0], "tcp://10.0.0.9:4003 (1.00 GiB)"]


def _by_hand() -> Any:
    """Dask's memory monitor off: the in-process worker is the test's process, whose memory
    (a busy pytest worker's) must not pause it; the tests pause it by hand."""
    import dask

    return dask.config.set({"distributed.worker.memory.pause": False,
                            "distributed.worker.memory.terminate": False,
                            "distributed.worker.memory.spill": False,
                            "distributed.worker.memory.target": False})


@pytest.mark.slow
def test_a_paused_dask_worker_is_read_as_paused() -> None:
    """The fields paused_workers reads are those a real scheduler's identity has."""
    from distributed import Client, LocalCluster
    from distributed.core import Status

    with _by_hand(), LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1", scheduler_port=0,
                                  dashboard_address=None,
                                  scheduler_kwargs=NO_HTTP, memory_limit=GIB) as cluster, \
            Client(cluster) as client:
        worker = next(iter(cluster.workers.values()))
        assert paused_workers(client.scheduler_info(n_workers=-1)) == []
        client.loop.add_callback(setattr, worker, "status", Status.paused)
        deadline = time.monotonic() + 120.0
        while not (found := paused_workers(client.scheduler_info(n_workers=-1))):
            assert time.monotonic() < deadline, "the scheduler never saw the pause"
            time.sleep(0.05)
        assert len(found) == 1 and found[0].startswith(f"{worker.address} (")
        assert found[0].endswith(" of its 1.00 GiB limit)")


@pytest.mark.slow
def test_a_suite_on_paused_workers_says_so_and_goes_on_when_they_resume(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Client, LocalCluster
    from distributed.core import Status

    class Prompt(WorkerWatch):  # (no grace: the test waits for the line, not for 10 s)
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.grace_s, self.interval_s = 0.0, 0.05

    monkeypatch.setattr(cluster_module, "WorkerWatch", Prompt)
    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(tmp_path / "store"), tiny)
    plan = suite.plan([get_study("segmentation")], [0])
    said: list[str] = []
    with _by_hand(), LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1", scheduler_port=0,
                                  dashboard_address=None,
                                  scheduler_kwargs=NO_HTTP, memory_limit=GIB) as cluster, \
            Client(cluster) as client:
        worker = next(iter(cluster.workers.values()))

        def set_status(status: Status) -> None:
            client.loop.add_callback(setattr, worker, "status", status)

        def say(line: str) -> None:
            said.append(line)
            if "is paused" in line:
                set_status(Status.running)  # the line came: the worker may resume

        set_status(Status.paused)
        deadline = time.monotonic() + 120.0
        while not paused_workers(client.scheduler_info(n_workers=-1)):
            assert time.monotonic() < deadline, "the scheduler never saw the pause"
            time.sleep(0.05)
        records = execute(suite, plan, client, say=say)
    assert sorted(records) == sorted(run.key for run in plan)
    assert len(said) == 2, said
    assert said[0].startswith(f"every Dask worker of {cluster.scheduler_address} is paused")
    assert f"{worker.address} (" in said[0]
    assert said[1] == f"1 Dask worker of {cluster.scheduler_address} runs again: the runs go on"
