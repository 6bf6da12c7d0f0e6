"""The runs, fleet and budgets pages, and each render of the runs' and the fleet's live pages,
read the store and the reader in a thread: the coordinator's event loop answers meanwhile.

Before, ``Views.runs`` and ``Views.fleet`` read each run's row whole (its deny list too: ~1 s
with 1,000,000 items) and its rounds on the loop, once a second per open live page, and
``Views.budgets`` every device's charges; no device or caller was answered meanwhile. The
probe: each read asks the loop to run a callback and waits for it (``call_soon_threadsafe``),
which a read holding the loop never sees. What the runner is doing, which the loop changes,
is still shown."""

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
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

# How long a read waits for the loop to run its callback: a free loop runs it at once; a
# read on the loop's own thread waits it out (once: the reads after it do not wait)
PROBE_S = 30.0
READS = ((Store, "run_head"), (Store, "rounds"), (Store, "run_states"), (Reader, "run_times"),
         (Reader, "fleet"), (Reader, "recent_enrollments"), (Reader, "device_charges"))


def test_the_runs_fleet_and_budgets_pages_read_while_the_loop_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    for run_id in ("a", "b"):
        asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                                min_devices=300, deny_list=("spam",)), run_id))
    store.set_run_state("b", "running")
    probe = LoopProbe(PROBE_S)
    for owner, name in READS:
        probe.watch(monkeypatch, owner, name)
    dashboard = offline_dashboard(store, db, "b")
    views = dashboard.views
    rendered: list[dict[str, str]] = []

    async def serve(request: Any, regions: Callable[[], Awaitable[dict[str, Any]]],
                    headers: Any) -> Any:
        rendered.append({name: str(html) for name, html in (await regions()).items()})
        return web.Response()

    monkeypatch.setattr(dashboard.live, "serve", serve)

    async def viewed() -> list[str]:
        probe.loop = asyncio.get_running_loop()
        pages = []
        for path, handler in (("/runs", dashboard.runs), ("/fleet", dashboard.fleet),
                              ("/budgets", dashboard.budgets)):
            page = await handler(make_mocked_request("GET", path))
            assert page.status == 200
            pages.append(page.text or "")
        await dashboard.live_runs(make_mocked_request("GET", "/live/runs"))
        await dashboard.live_fleet(make_mocked_request("GET", "/live/fleet"))
        return pages

    try:
        runs_page, fleet_page, _ = asyncio.run(viewed())
    finally:
        views.reader.close()
        store.close()
    assert {name for _, name in READS} <= set(probe.answered)
    assert probe.all_free(), probe.answered
    # (what run b is doing: the runner's progress, read on the loop)
    assert "round 1.1: check-in" in runs_page and "b, round 1.1: check-in" in fleet_page
    assert "round 1.1: check-in" in rendered[0]["runs"]
    assert "b, round 1.1: check-in" in rendered[1]["fleet-counts"]
