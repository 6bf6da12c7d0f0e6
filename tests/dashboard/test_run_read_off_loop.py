"""A run's page, its downloads and each render of its live page read the run from the store
and build its parts (``RunFixed``, ``RunFixed.parts``) in a thread, not on the coordinator's
event loop.

``Views.run`` read the row whole, built the run's tree and ledger and read its rounds on the
loop, once a second while a live page was open: ~2.2 s for ``RunParts.load`` alone with a
1,000,000-item deny list, during which no device or caller was answered. Each step records
whether it ran with a running event loop; the runner's progress, which the loop changes, is
still shown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from offline_dashboard_kit import offline_dashboard

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard import views as views_module
from fedhh_coordinator.runs import RunFixed, create_run
from fedhh_coordinator.store import Store


def test_the_run_page_download_and_live_render_read_the_run_in_a_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300, deny_list=("spam", "eggs")), "d"))
    # (each call from now on: whether it ran on the thread of the event loop, asyncio.run's)
    on_loop: dict[str, list[bool]] = {}
    for owner, name in ((RunFixed, "of"), (RunFixed, "parts"), (Store, "run"),
                        (Store, "run_head"), (Store, "rounds")):
        step: Callable[..., Any] = getattr(owner, name)

        def watched(*args: Any, _name: str = name, _step: Callable[..., Any] = step,
                    **kwargs: Any) -> Any:
            on_loop.setdefault(_name, []).append(
                threading.current_thread() is threading.main_thread())
            return _step(*args, **kwargs)

        monkeypatch.setattr(owner, name, staticmethod(watched) if name == "of" else watched)
    # (the planner's solve is a thread's already; its answer does not matter here)
    monkeypatch.setattr(views_module, "_budget_words", lambda *_: ("", ""))
    dashboard = offline_dashboard(store, db, "d")
    views = dashboard.views
    rendered: list[str] = []

    async def serve(request: Any, regions: Callable[[], Awaitable[dict[str, Any]]],
                    headers: Any) -> Any:
        for _ in range(2):  # the stream's first two renders
            rendered.append(str((await regions())["run-head"]))
        return web.Response()

    monkeypatch.setattr(dashboard.live, "serve", serve)

    async def viewed() -> list[int]:
        page = await dashboard.run(make_mocked_request("GET", "/runs/d",
                                                       match_info={"run_id": "d"}))
        download = await dashboard.download(make_mocked_request(
            "GET", "/runs/d/heavy-hitters.csv", match_info={"run_id": "d", "kind": "csv"}))
        await dashboard.live_run(make_mocked_request("GET", "/live/runs/d",
                                                     match_info={"run_id": "d"}))
        return [page.status, download.status]

    try:
        assert asyncio.run(viewed()) == [200, 200]
    finally:
        views.reader.close()
        store.close()
    assert len(on_loop["parts"]) >= 4  # (the page, the download and two renders at least)
    assert on_loop == {name: [False] * len(calls) for name, calls in on_loop.items()}
    assert len(rendered) == 2 and all("check-in" in head for head in rendered)
