"""StartRun cancelled while its worker thread stores the run (the caller's deadline, Ctrl-C).

The thread is not stopped by the cancel and stores the run; before, the runner was woken only
once the call went on, so an idle runner never heard of the run: it stayed pending, and
StartRun again with its id was ALREADY_EXISTS.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest
from admin_service_kit import ADMIN_TOKEN, METADATA

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.service import AdminService
from fedhh_coordinator.store import Store


class Runner:
    def __init__(self) -> None:
        self.woken = asyncio.Event()

    def wake(self) -> None:
        self.woken.set()

    def progress_of(self, run_id: str) -> None:
        return None


class Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return METADATA

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


def test_a_run_stored_after_its_call_was_cancelled_wakes_the_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "c.sqlite")
    entered, release = threading.Event(), threading.Event()
    write = Store.create_run

    def held_write(self: Store, *args: Any) -> None:
        entered.set()
        release.wait(60)
        write(self, *args)

    monkeypatch.setattr(Store, "create_run", held_write)

    async def go() -> bool:
        runner = Runner()
        admin = AdminService(store, runner, ADMIN_TOKEN,  # type: ignore[arg-type]
                             LifetimeBudget(eps=1e9, delta=0.5))
        call = asyncio.ensure_future(admin.StartRun(pb.StartRunRequest(
            run_id="p", config=pb.RunConfig(eps_agg=4.0, target_devices=400,
                                            min_devices=300)), Context()))  # type: ignore[arg-type]
        assert await asyncio.to_thread(entered.wait, 60)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        release.set()
        try:
            await asyncio.wait_for(runner.woken.wait(), 60)
        except TimeoutError:
            return False
        return True

    try:
        woken = asyncio.run(go())
        assert store.run("p").state == "pending"
    finally:
        release.set()
        store.close()
    assert woken
