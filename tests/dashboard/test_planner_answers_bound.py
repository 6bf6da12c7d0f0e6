"""The dashboard keeps the planner's answers (``Views.ask_planner``) for the runs viewed latest,
at most ``planned_size``: one entry a run viewed, and a coordinator makes runs without end.
Before, every run ever viewed kept its entry for the dashboard's life."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard import views as views_module
from fedhh_coordinator.dashboard.views import PLANNED_RUNS, Views
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


def test_the_planner_answers_kept_are_the_latest_runs_viewed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    solved: list[float] = []

    def words(config: RunConfig, eps_local: float, planner: bool) -> tuple[str, str]:
        solved.append(config.eps_agg)  # (each run has its own eps_agg: which run was solved)
        return f"ran out at {config.eps_agg}", ""

    monkeypatch.setattr(views_module, "_budget_words", words)
    store = Store(tmp_path / "c.sqlite")
    try:
        eps = {"a": 1.0, "b": 2.0, "c": 3.0}
        for run_id, eps_agg in eps.items():
            asyncio.run(create_run(store, RunConfig(eps_agg=eps_agg, min_devices=100), run_id))
        views = Views(store, None, None, None, None)  # type: ignore[arg-type]
        assert views.planned_size == PLANNED_RUNS
        views.planned_size = 2

        async def ask(*run_ids: str) -> list[str]:
            for run_id in run_ids:
                await views.ask_planner(run_id)
            return list(views._planned)  # (least recently used first)

        assert asyncio.run(ask("a", "b")) == ["a", "b"]
        # a again (no solve: kept, now the latest), then c: b, the least recently used, goes
        assert asyncio.run(ask("a", "c")) == ["a", "c"]
        assert solved == [1.0, 2.0, 3.0]
        assert views._planned["c"] == ("ran out at 3.0", "")
        # b asked again is solved again; a, used before c, goes
        assert asyncio.run(ask("b")) == ["c", "b"]
        assert solved == [1.0, 2.0, 3.0, 2.0]
    finally:
        store.close()


def test_a_run_page_counts_as_a_use_of_its_answer() -> None:
    """A run's page read its answer: it stays before one asked of the planner only."""
    views = Views(None, None, None, None, None)  # type: ignore[arg-type]
    views.planned_size = 2
    views._planned.update({"a": ("x", ""), "b": ("y", "")})
    assert views._planned_words("a") == ("x", "")  # (as ``run`` reads it)
    assert views._planned_words("z") is None
    assert list(views._planned) == ["b", "a"]

    async def solve(run_id: str) -> None:  # (a solve under way that has just ended)
        views._solving[run_id] = asyncio.get_running_loop().create_future()
        views._solving[run_id].set_result(("w", ""))
        await views.ask_planner(run_id)

    asyncio.run(solve("c"))
    assert list(views._planned) == ["a", "c"]
