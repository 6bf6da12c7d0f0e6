"""The runs' fixed parts kept (``runs.FixedRuns``: GetRun's, GetResults' and the dashboard's)
are bounded by the deny items they hold, not by their count alone: a run with 1,000,000 deny
items holds ~160 MiB kept, and the 8 runs kept could hold 1.3 GB. The latest run read is
kept whatever it holds; a run read again is kept as the latest, a run pushed out is loaded
again when read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from admin_service_kit import DENIED, denying_run, recorded_queries

import fedhh_coordinator.runs as runs
from fedhh_coordinator.runs import FixedRuns
from fedhh_coordinator.store import Store


def test_the_fixed_parts_kept_hold_at_most_their_bound_of_deny_items(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "c.sqlite")
    for run_id in ("a", "b", "c"):
        denying_run(store, run_id)
    # (two such runs; raising=False: the old code had no such bound, and keeps all three)
    monkeypatch.setattr(runs, "FIXED_DENY_ITEMS", 2 * len(DENIED), raising=False)
    fixed = FixedRuns()
    reads, _ = recorded_queries(store, monkeypatch)

    async def read(*run_ids: str) -> int:
        """The row reads whole of ``run_ids`` read in turn."""
        before = len(reads)
        for run_id in run_ids:
            await fixed.get(store, run_id)
        return sum("deny_codes" in sql for sql in reads[before:])

    async def scenario() -> list[int]:
        return [await read("a", "b", "c"),  # (each loaded; a pushed out by c)
                await read("b", "c"),  # (kept)
                await read("a"),  # (loaded again, pushing b out)
                await read("c", "a"),  # (kept)
                await read("b")]  # (loaded again)

    try:
        loads = asyncio.run(scenario())
    finally:
        store.close()
    assert loads == [3, 0, 1, 0, 1]  # (the old code kept all 3: [3, 0, 0, 0, 0])


def test_the_latest_run_read_is_kept_whatever_it_holds(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    denying_run(store, "a")
    fixed = FixedRuns(size=8, items=1)

    async def twice() -> bool:
        return await fixed.get(store, "a") is await fixed.get(store, "a")

    try:
        assert asyncio.run(twice())
    finally:
        store.close()

