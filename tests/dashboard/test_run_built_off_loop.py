"""A run's page, its downloads and each render of its live page build what they show of the
run in the thread that reads it, as the fleet page draws the latest runs' finished attempts:
the coordinator's event loop answers meanwhile.

Before, ``Views.run`` read the run in a thread but found its heavy hitters and cut prefixes,
composed its ledger's spend, its notes and every attempt's timeline on the loop: for a run of
many rounds and a large tree, no device or caller was answered meanwhile, once a second per
open live page. The probe (``LoopProbe``): each step asks the loop to run a callback and waits
for it, which a step holding the loop never sees. What the runner is doing, which the loop
changes, is still shown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from offline_dashboard_kit import LoopProbe, offline_dashboard

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard import views as views_module
from fedhh_coordinator.dashboard.results import SpendCache
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

# How long a step waits for the loop to run its callback: a free loop runs it at once; a step
# on the loop's own thread waits it out (once: the steps after it do not wait)
PROBE_S = 30.0
BUILD = ("heavy_hitters", "cut_prefixes", "attempt_view", "_completion_note", "_trim_note")


def test_the_run_page_download_and_live_render_build_the_run_while_the_loop_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300, deny_list=("spam",)), "d"))
    for _ in range(3):  # (finished attempts: the runner is in none of them)
        store.abort_round("d", 1, store.open_round("d", 1), "too few devices")
    # (the planner's solve is a thread's already; its answer does not matter here)
    monkeypatch.setattr(views_module, "_budget_words", lambda *_: ("", ""))
    probe = LoopProbe(PROBE_S)
    for name in BUILD:
        probe.watch(monkeypatch, views_module, name)
    probe.watch(monkeypatch, SpendCache, "__call__")
    dashboard = offline_dashboard(store, db, "d")
    rendered: list[str] = []

    async def serve(request: Any, regions: Callable[[], Awaitable[dict[str, Any]]],
                    headers: Any) -> Any:
        rendered.append(str((await regions())["run-head"]))
        return web.Response()

    monkeypatch.setattr(dashboard.live, "serve", serve)

    async def viewed() -> list[tuple[int, str]]:
        probe.loop = asyncio.get_running_loop()
        pages = []
        for path, handler, match in (
                ("/runs/d", dashboard.run, {"run_id": "d"}),
                ("/runs/d/heavy-hitters.csv", dashboard.download,
                 {"run_id": "d", "kind": "csv"}),
                ("/fleet", dashboard.fleet, {})):
            page = await handler(make_mocked_request("GET", path, match_info=match))
            pages.append((page.status, page.text or ""))
        await dashboard.live_run(make_mocked_request("GET", "/live/runs/d",
                                                     match_info={"run_id": "d"}))
        return pages

    try:
        (run, _), (download, _), (fleet, fleet_page) = asyncio.run(viewed())
    finally:
        dashboard.views.reader.close()
        store.close()
    assert [run, download, fleet] == [200, 200, 200]
    assert set(BUILD) | {"__call__"} <= set(probe.answered)
    assert len(probe.answered["attempt_view"]) >= 4 * 3  # (each page's three attempts)
    assert probe.all_free(), probe.answered
    # (what the runner is doing, read on the loop)
    assert len(rendered) == 1 and "round 1.1: check-in" in rendered[0]
    assert "d, round 1.1: check-in" in fleet_page
