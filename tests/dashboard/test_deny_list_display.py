"""The dashboard and GetResults display a run's deny list once between them, in a thread
(``Views.show_deny``, ``runs.ShownDenyLists``).

``run`` decoded every code of it on the coordinator's event loop, and the live run page asks
``run`` every second: a 170,000-item list (codebook unicode, ~0.2 ms a code) held the loop
~35 s each time, no device or caller answered. Each ``display_item`` records whether it ran
with a running event loop. GetResults displayed the list at each call (~60 s of CPU for
300,000 items), beside the dashboard's copy."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from admin_service_kit import METADATA, admin_stub
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.codec import Codec
from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard import Dashboard
from fedhh_coordinator.dashboard.auth import Sessions
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import DENY_SHOWN_RUNS, create_run
from fedhh_coordinator.store import Store

ITEMS = ("spam", "eggs", "ham")


def _views(store: Store, db: Path, run_ids: list[str]) -> Views:
    """Views over ``store``, a run of deny list ``ITEMS`` stored for each of ``run_ids``."""
    for run_id in run_ids:
        asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                                min_devices=300, deny_list=ITEMS), run_id))
    lobby = Lobby()
    runner = Runner(store, None, Ed25519PrivateKey.generate(), "127.0.0.1:1",  # type: ignore[arg-type]
                    lobby, LifetimeBudget(100.0, 1e-4))
    return Views(store, runner, lobby, LifetimeBudget(100.0, 1e-4), Reader(db))


def _watch_display(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each ``display_item`` call, whether it ran with a running event loop."""
    calls: list[bool] = []
    display: Callable[..., Any] = Codec.display_item

    def watched(self: Codec, code: int) -> str:
        try:
            asyncio.get_running_loop()
            calls.append(True)
        except RuntimeError:
            calls.append(False)
        return str(display(self, code))

    monkeypatch.setattr(Codec, "display_item", watched)
    return calls


def test_a_deny_list_is_displayed_once_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    views = _views(store, db, ["d"])
    calls = _watch_display(monkeypatch)

    async def pages() -> list[tuple[str, ...]]:
        shown = []
        for _ in range(2):  # (a page, then the live page's next render)
            await views.show_deny("d")
            shown.append((await views.run("d")).deny)
        await views.show_deny("unknown")  # (left to ``run`` to say)
        return shown

    try:
        first, second = asyncio.run(pages())
        created_at = store.run_created_at("d")
    finally:
        views.reader.close()
        store.close()
    assert sorted(first) == sorted(ITEMS) and second == first
    assert calls == [False] * len(ITEMS)  # each code once, in a thread
    assert views.deny.kept("d", created_at) == first
    assert views.deny.kept("unknown", created_at) is None


def test_a_live_run_page_keeps_its_deny_list_while_other_runs_are_viewed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The live page renders ``run`` every second for as long as it is open; the views keep
    the last ``deny_size`` runs' lists only, so other runs viewed meanwhile pushed its list
    out, and each render displayed it again on the loop."""
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    runs = [f"d{i}" for i in range(DENY_SHOWN_RUNS + 1)]
    views = _views(store, db, runs)
    dashboard = Dashboard(views, Sessions(b"t" * 32), None)
    on_loop = _watch_display(monkeypatch)
    rendered: list[str] = []

    async def serve(request: Any, regions: Callable[[], Awaitable[dict[str, Any]]],
                    headers: Any) -> Any:
        for other in runs[1:]:  # the operator opens the other runs' pages
            await views.show_deny(other)
        rendered.append(str((await regions())["run-head"]))  # the stream's next render
        return web.Response()

    monkeypatch.setattr(dashboard.live, "serve", serve)

    async def live() -> None:
        await dashboard.live_run(make_mocked_request("GET", f"/live/runs/{runs[0]}",
                                                     match_info={"run_id": runs[0]}))

    try:
        asyncio.run(live())
        created_at = store.run_created_at(runs[0])
    finally:
        views.reader.close()
        store.close()
    assert views.deny.kept(runs[0], created_at) is None  # (pushed out, as the test means)
    assert on_loop == [False] * len(ITEMS) * len(runs)  # each run's codes once, in a thread
    assert all(f">{item}<" in rendered[0] for item in ITEMS)


def test_get_results_and_the_dashboard_display_a_deny_list_once_between_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    views = _views(store, tmp_path / "coordinator.sqlite", ["d"])

    async def asked() -> list[list[str]]:
        async with admin_stub(store, deny=views.deny) as stub:
            lists = [list((await stub.GetResults(pb.GetResultsRequest(run_id="d"),
                                                 metadata=METADATA, timeout=60)).deny_list)
                     for _ in range(2)]
        shown = await views.show_deny("d")
        assert shown is not None
        return [*lists, list(shown), list((await views.run("d")).deny)]

    calls = _watch_display(monkeypatch)
    try:
        lists = asyncio.run(asked())
    finally:
        views.reader.close()
        store.close()
    assert sorted(lists[0]) == sorted(ITEMS) and all(shown == lists[0] for shown in lists)
    assert calls == [False] * len(ITEMS)  # each code once, in a thread
