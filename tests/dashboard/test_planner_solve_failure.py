"""A planner's solve (``Views.ask_planner``) that fails after every request for it went away
(a page closed while it solved) has its error retrieved: nothing is left for asyncio to log.
Before, the solve's task was left with its error, and asyncio logged "Task exception was never
retrieved" with the traceback once the task was collected."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard import views as views_module
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


def test_a_solve_that_fails_after_every_request_left_is_not_reported_unretrieved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started, failing = threading.Event(), threading.Event()

    def words(*_: Any) -> tuple[str, str]:
        started.set()
        failing.wait()  # (until the request has gone)
        raise RuntimeError("the solver failed")

    monkeypatch.setattr(views_module, "_budget_words", words)
    store = Store(tmp_path / "c.sqlite")
    asyncio.run(create_run(store, RunConfig(eps_agg=2.0, min_devices=100), "a"))
    views = Views(store, None, None, None, None)  # type: ignore[arg-type]
    reported: list[str] = []

    async def left() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(context["message"]))
        asking = asyncio.ensure_future(views.ask_planner("a"))
        await asyncio.to_thread(started.wait)
        solving = views._solving["a"]
        asking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asking
        failing.set()
        await asyncio.wait([solving])  # (ended, its error not asked for)
        assert solving.done()
        del solving
        gc.collect()  # (an unretrieved error is reported as its task is collected)

    try:
        asyncio.run(left())
    finally:
        store.close()
    assert reported == []
    assert views._solving == {}
