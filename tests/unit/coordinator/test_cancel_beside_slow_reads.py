"""CancelRun asks the cancel before it reads anything in the slow reads' threads
(``slow_reads.off_loop``): every one of them may be held by reads of a minute (GetResults over
a 300,000-item deny list), and the cancel must not wait for them.

Before, CancelRun read the run's row whole in those threads first: behind ``THREADS``
GetResults it was never asked within its caller's deadline (``fedhh admin cancel``: 30 s), and
the operator could not stop the run. Here the reads hang until released."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from fedhh.config import RunConfig
from fedhh.errors import NotFoundError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import slow_reads
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.service import AdminService
from fedhh_coordinator.store import Store

TOKEN = b"admin-token-of-the-test"
# A cancel asked at once is seen at once; this only bounds the wait for one held behind the
# reads (the old code's failure)
ASKED_S = 30.0


class Context:
    """What the admin calls ask of a gRPC call's context."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKEN.decode()}"),)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"


class Runner:
    """A runner driving the run: its cancel is what CancelRun asks of a running run."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.progress: dict[str, Any] = {}

    def cancel(self, run_id: str, by: str) -> None:
        self.asked.set()

    def progress_of(self, run_id: str) -> pb.Progress | None:
        return None


def test_a_cancel_is_asked_while_every_slow_read_thread_is_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    # (one GetResults a run: those of one run wait for its one deny-list display holding no
    # thread, ShownDenyLists.show)
    held = ["kept", *(f"other{i}" for i in range(1, slow_reads.THREADS))]
    for run_id in held:
        asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                                min_devices=300, deny_list=("spam",)), run_id))
    store.set_run_state("kept", "running")
    release = threading.Event()
    load = RunParts.load

    def slow_load(row: Any) -> RunParts:  # (a 300,000-item deny list's read, until released)
        release.wait()
        return load(row)

    monkeypatch.setattr(RunParts, "load", staticmethod(slow_load))

    async def scenario() -> tuple[bool, pb.Run]:
        runner = Runner()
        admin = AdminService(store, runner, TOKEN, LifetimeBudget())  # type: ignore[arg-type]
        reads = [asyncio.create_task(admin.GetResults(pb.GetResultsRequest(run_id=run_id),
                                                      Context()))  # type: ignore[arg-type]
                 for run_id in held]
        await asyncio.sleep(0)  # (each read handed to its thread)
        cancel = asyncio.create_task(admin.CancelRun(pb.CancelRunRequest(run_id="kept"),
                                                     Context()))  # type: ignore[arg-type]
        try:
            await asyncio.wait_for(runner.asked.wait(), ASKED_S)
            asked = True
        except TimeoutError:
            asked = False
        finally:
            release.set()
        await asyncio.gather(*reads)
        return asked, await cancel

    try:
        asked, answer = asyncio.run(scenario())
    finally:
        release.set()
        store.close()
    assert asked
    assert answer.run_id == "kept"


def test_a_cancel_of_a_run_id_with_a_nul_is_refused_as_unknown(tmp_path: Path) -> None:
    """The state alone is read now: it refuses such an id as the whole row's read did
    (PostgreSQL refuses a NUL in a text parameter)."""
    store = Store(tmp_path / "coordinator.sqlite")
    try:
        with pytest.raises(NotFoundError, match="unknown run"):
            store.run_state("kept\x00")
    finally:
        store.close()
