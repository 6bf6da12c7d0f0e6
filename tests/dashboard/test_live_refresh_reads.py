"""A render of a run's live page reads what changes as the run runs (``Store.run_head``: its
state, tree state, ledger and error; its rounds), not its config and deny list, which never
change: those are read once, for every page that asks while they load, and kept
(``FixedRuns``). So are the runs' and the fleet's live pages.

Before, each render read the run's row whole and rebuilt its parts (~3 s with a 1,000,000-item
deny list): 32 live pages of such a run held every slow reads' thread once a second, and
GetRun and GetResults waited behind them. Counted here: the bytes of text each render reads
from the store, which must not grow with the deny list, and the reads of the row whole."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from offline_dashboard_kit import offline_dashboard

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard.server import Dashboard
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

PAGES = 8  # live pages of one run, each rendering at once


class Counted:
    """The store's queries from now on: each one's SQL and the text (str or bytes) it read."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        query = store.db.query

        def counted(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            rows = query(sql, params)
            self.calls.append((sql, sum(len(cell) for row in rows for cell in row
                                        if isinstance(cell, str | bytes))))
            return rows

        monkeypatch.setattr(store.db, "query", counted)

    def take(self) -> tuple[int, int]:
        """(text bytes read, reads of a run's deny list) since the last take."""
        calls, self.calls = self.calls, []
        return sum(n for _, n in calls), sum("deny_codes" in sql for sql, _ in calls)


def _store(tmp_path: Path, deny_items: int) -> Store:
    store = Store(tmp_path / "coordinator.sqlite")
    deny = tuple(f"denied-item-{k:06d}" for k in range(deny_items))
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300, deny_list=deny), "r"))
    store.set_run_state("r", "running")
    return store


def _refreshes(dashboard: Dashboard, counted: Counted) -> list[tuple[int, int]]:
    """(bytes, deny-list reads) of: the deny list's display and the pages' first renders at
    once, then two more rounds of renders at once, then a render of the runs' and of the
    fleet's live pages."""
    views = dashboard.views

    async def viewed() -> list[tuple[int, int]]:
        counted.take()
        deny = await views.show_deny("r")  # (as the live page does, once, before it streams)
        reads = []
        for _ in range(3):
            await asyncio.gather(*(views.run("r", deny) for _ in range(PAGES)))
            reads.append(counted.take())
        await views.runs()
        reads.append(counted.take())
        await views.fleet()
        reads.append(counted.take())
        return reads

    return asyncio.run(viewed())


@pytest.mark.parametrize("deny_items", [10, 4000])
def test_a_live_render_reads_what_changes_not_the_deny_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deny_items: int) -> None:
    store = _store(tmp_path, deny_items)
    dashboard = offline_dashboard(store, tmp_path / "coordinator.sqlite", "r")
    counted = Counted(store, monkeypatch)
    small = Store(tmp_path / "small.sqlite")  # (the same run, with no deny list)
    try:
        first, *later, runs, fleet = _refreshes(dashboard, counted)
        # the deny list's display and the pages' first renders load the run's fixed part
        # once, among them all (before, the display read the row whole for its codes too: 2)
        assert first[1] == 1
        # then no render reads the deny list, nor more bytes than a render of the same run
        # with none: 10 and 4,000 items read alike
        assert all(deny == 0 for _, deny in (*later, runs, fleet))
        asyncio.run(create_run(small, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                                min_devices=300), "r"))
        small.set_run_state("r", "running")
        bare = Counted(small, monkeypatch)
        bare_dashboard = offline_dashboard(small, tmp_path / "small.sqlite", "r")
        try:
            _, *bare_later, bare_runs, bare_fleet = _refreshes(bare_dashboard, bare)
        finally:
            bare_dashboard.views.reader.close()
        assert [n for n, _ in (*later, runs, fleet)] == \
            [n for n, _ in (*bare_later, bare_runs, bare_fleet)]
    finally:
        dashboard.views.reader.close()
        store.close()
        small.close()


def test_a_render_shows_the_run_as_it_is_now(tmp_path: Path) -> None:
    """What changes is read at each render (state, error); a fixed part kept of another run
    of the id (another ``created_at``) is not used."""
    store = _store(tmp_path, 3)
    dashboard = offline_dashboard(store, tmp_path / "coordinator.sqlite", "r")
    views = dashboard.views

    async def viewed() -> list[tuple[str, str, float]]:
        seen = []
        detail = await views.run("r")
        seen.append((detail.line.shown_state, detail.line.error, detail.config.eps_agg))
        store.ask_cancel("r", "cancel asked")
        detail = await views.run("r")
        seen.append((detail.line.shown_state, detail.line.error, detail.config.eps_agg))
        store.set_run_state("r", "cancelled", "cancelled by the operator")
        kept = views.fixed._kept.get("r")
        assert kept is not None
        views.fixed._kept.put("r", dataclasses.replace(
            kept, config=dataclasses.replace(kept.config, eps_agg=1.0),
            created_at=kept.created_at - 1), over=kept)
        detail = await views.run("r")
        seen.append((detail.line.shown_state, detail.line.error, detail.config.eps_agg))
        return seen

    try:
        assert asyncio.run(viewed()) == [
            ("running", "", 4.0), ("running", "cancel asked", 4.0),
            ("cancelled", "cancelled by the operator", 4.0)]
    finally:
        views.reader.close()
        store.close()
