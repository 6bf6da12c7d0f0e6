"""The admin API's and the dashboard's reads run in threads of their own, at most
``slow_reads.THREADS`` at once, not in the event loop's default executor, which the runner
uses to load each run it drives (``Runner.drive``: ``asyncio.to_thread``) and StartRun to
store a run.

Before, a few GetResults over a run with a 300,000-item deny list (~60 s each) and the
dashboard's reads held every thread of the default executor (6 on 2 cores), and the runner
waited for them. Here the default executor has 2 threads and 8 reads (4 GetResults, 4 of the
dashboard's run page) hang until released: the runner's load must still run."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import slow_reads
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.service import AdminService
from fedhh_coordinator.store import Store

TOKEN = b"admin-token-of-the-test"
# The runner's load, when the default executor is free, runs at once; this only bounds how
# long the test waits for one held behind the reads (the old code's failure)
LOAD_S = 60.0


class Context:
    """What the admin calls ask of a gRPC call's context."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKEN.decode()}"),)


class Idle:
    progress: ClassVar[dict[str, Any]] = {}

    def progress_of(self, run_id: str) -> pb.Progress | None:
        return None


def test_admin_and_dashboard_reads_leave_the_default_executor_to_the_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300, deny_list=("spam",)), "kept"))
    release = threading.Event()
    held, most = [0], [0]
    count = threading.Lock()
    load = RunParts.load

    def slow_load(row: Any) -> RunParts:  # (a 300,000-item deny list's read, until released)
        with count:
            held[0] += 1
            most[0] = max(most[0], held[0])
        release.wait()
        with count:
            held[0] -= 1
        return load(row)

    monkeypatch.setattr(RunParts, "load", staticmethod(slow_load))
    admin = AdminService(store, Idle(), TOKEN, LifetimeBudget())  # type: ignore[arg-type]
    views = Views(store, Idle(), Lobby(), LifetimeBudget(), Reader(db))  # type: ignore[arg-type]

    async def scenario() -> tuple[bool, list[Any]]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(2))
        reads = [asyncio.create_task(admin.GetResults(pb.GetResultsRequest(run_id="kept"),
                                                      Context()))  # type: ignore[arg-type]
                 for _ in range(4)]
        reads += [asyncio.create_task(views.run("kept")) for _ in range(4)]
        await asyncio.sleep(0)  # (each read handed to its executor)
        try:
            loaded = await asyncio.wait_for(asyncio.to_thread(lambda: True), LOAD_S)
        except TimeoutError:
            loaded = False
        finally:
            release.set()
        return loaded, await asyncio.gather(*reads)

    try:
        loaded, answers = asyncio.run(scenario())
    finally:
        release.set()
        views.reader.close()
        store.close()
    assert loaded
    assert [list(a.deny_list) for a in answers[:4]] == [["spam"]] * 4
    assert [a.line.run_id for a in answers[4:]] == ["kept"] * 4
    assert most[0] <= slow_reads.THREADS
