"""The dashboard's JSON download and page, for a run at the networked defaults (eps_agg 1,
n_min 100), whose budget fits no completion round: a long item truncated at the main rounds'
width says the privacy budget ended it (not "no rounds left", which sent a user to
--completion-rounds), and ``completion_note`` gives the figures and what raises them."""

from __future__ import annotations

import asyncio
import html
import json
from typing import Any

import pytest
from dashboard_kit import Served

from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.server import causes
from fedhh.server.causes import NO_COMPLETION, NO_MORE_COMPLETION, completion_budget_note
from fedhh.server.prefixtree import Found, TreeState
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.store import Store

LONG = "https://example.com/" + "abcdefghij" * 4  # past the main rounds' 60 bits


def _run_to_its_end(served: Served, config: RunConfig, run_id: str) -> RunParts:
    """A run of ``config`` as the coordinator creates it (its planner), its every round
    released; the last finds "ab" (of round 2) and LONG, cut at the width of the last round."""
    store = Store(served.db)
    try:
        parts = RunParts.load(asyncio.run(create_run(store, config, run_id)))
        ledger, last = parts.ledger, parts.config.rounds + parts.config.completion()
        codes = cw.to_ints(parts.tree.codec.encode_many(["ab", LONG]).codes)
        found = (Found(codes[0], 90.0, 2), Found(codes[1], 80.0, last))
        for round_ in range(1, last + 1):
            attempt = store.open_round(run_id, round_)
            ledger = ledger.record(round_ - 1, 120)
            store.charge_round(run_id, round_, attempt, "releasing", 120, ledger.to_dict())
            done = round_ == last
            state = TreeState(next_round=round_ + 1, discovered=found if done else (), done=done)
            store.release_round(run_id, round_, attempt, state.to_dict(),
                                {"kept": 1, "participants": 120, "threshold": 40.0}, done=done)
    finally:
        store.close()
    return parts


def test_a_run_whose_budget_fits_no_completion_round_says_so(served: Served) -> None:
    parts = _run_to_its_end(served, RunConfig(min_devices=100), "defaults")
    assert parts.config.completion() == 0  # (all dropped by the planner)
    status, _, body = served.request("GET", "/runs/defaults/heavy-hitters.json",
                                     headers={"Cookie": served.sign_in()})
    assert status == 200, body[:300]
    shown = json.loads(body)
    truncated = [h for h in shown["heavy_hitters"] if h["truncated"]]
    assert [h["item"][:8] for h in truncated] == ["https://"], shown["heavy_hitters"]
    assert truncated[0]["cause"] == NO_COMPLETION
    note = completion_budget_note(parts.config, parts.ledger.eps_local, [NO_COMPLETION])
    assert note and shown["completion_note"] == note
    assert "eps_local 1.524 + ln 0.2 <= 0" in note
    status, _, page = served.request("GET", "/runs/defaults", headers={"Cookie": served.sign_in()})
    assert status == 200 and html.escape(note) in page.decode()


def test_where_the_planner_alone_refuses_the_next_round_the_dashboard_asks_it_off_the_loop(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """eps_agg 2.772 at n_min 100 (tests/cli/test_cause_when_budget_fits_no_completion.py):
    the test alone lets a 2nd completion round pass, the planner refuses it. The page and the
    download say the budget, as `fedhh admin results` does, and the solve (up to 1.7 s) runs
    in a thread, once for the run, not on the event loop that serves the devices. Before,
    "no rounds left" and no note."""
    solves: list[bool] = []  # each solve: whether it ran on an event loop's thread
    solve = causes._solver_refuses.__wrapped__  # (uncached: each call counted)

    def solver(*args: Any) -> bool:
        try:
            asyncio.get_running_loop()
            solves.append(True)
        except RuntimeError:
            solves.append(False)
        return bool(solve(*args))

    monkeypatch.setattr(causes, "_solver_refuses", solver)
    parts = _run_to_its_end(served, RunConfig(min_devices=100, eps_agg=2.772), "band")
    assert parts.config.completion() == 1
    cookie = {"Cookie": served.sign_in()}
    status, _, page = served.request("GET", "/runs/band", headers=cookie)
    assert status == 200, page[:300]
    asked = len(solves)
    assert asked and not any(solves), solves
    status, _, body = served.request("GET", "/runs/band/heavy-hitters.json", headers=cookie)
    assert status == 200, body[:300]
    assert len(solves) == asked  # (the run's answer kept)
    shown = json.loads(body)
    truncated = [h for h in shown["heavy_hitters"] if h["truncated"]]
    assert [h["cause"] for h in truncated] == [NO_MORE_COMPLETION], shown["heavy_hitters"]
    note = completion_budget_note(parts.config, parts.ledger.eps_local, [NO_MORE_COMPLETION],
                                  planner=True)
    assert note and "(the planner's resolution)" in note
    assert shown["completion_note"] == note
    assert html.escape(note) in page.decode()


def test_requests_that_come_while_the_planner_solves_await_that_solve(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three requests for a run's page at once: one solve, not three (each of up to 1.7 s in
    a thread of its own: before, ``ask_planner`` kept the answer only once a solve ended)."""
    solves: list[tuple[Any, ...]] = []
    solve = causes._solver_refuses.__wrapped__  # (uncached: each call counted)

    def solver(*args: Any) -> bool:
        solves.append(args)
        return bool(solve(*args))

    monkeypatch.setattr(causes, "_solver_refuses", solver)
    _run_to_its_end(served, RunConfig(min_devices=100, eps_agg=2.772), "band")

    async def ask(times: int) -> tuple[str, str]:
        store = Store(served.db)
        try:
            views = Views(store, None, None, None, None)  # type: ignore[arg-type]
            await asyncio.gather(*(views.ask_planner("band") for _ in range(times)))
            return views._planned["band"]  # (what ``run`` then gives)
        finally:
            store.close()

    alone = asyncio.run(ask(1))
    one_solve = len(solves)
    assert one_solve
    together = asyncio.run(ask(3))
    assert len(solves) == 2 * one_solve, len(solves)
    assert together == alone and "(the planner's resolution)" in alone[1]
