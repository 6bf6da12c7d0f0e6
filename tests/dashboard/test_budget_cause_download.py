"""The dashboard's JSON download and page, for a run at the networked defaults (eps_agg 1,
n_min 100), whose budget fits no completion round: a long item truncated at the main rounds'
width says the privacy budget ended it (not "no rounds left", which sent a user to
--completion-rounds), and ``completion_note`` gives the figures and what raises them."""

from __future__ import annotations

import asyncio
import html
import json

from dashboard_kit import Served

from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.server.causes import NO_COMPLETION, completion_budget_note
from fedhh.server.prefixtree import Found, TreeState
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.store import Store

LONG = "https://example.com/" + "abcdefghij" * 4  # past the main rounds' 60 bits


def test_a_run_whose_budget_fits_no_completion_round_says_so(served: Served) -> None:
    store = Store(served.db)
    try:
        row = asyncio.run(create_run(store, RunConfig(min_devices=100), "defaults"))
        parts = RunParts.load(row)
        assert parts.config.completion() == 0  # (all dropped by the planner)
        codec, ledger, main = parts.tree.codec, parts.ledger, parts.config.rounds
        codes = cw.to_ints(codec.encode_many(["ab", LONG]).codes)
        found = (Found(codes[0], 90.0, 2), Found(codes[1], 80.0, main))
        for round_ in range(1, main + 1):
            attempt = store.open_round("defaults", round_)
            ledger = ledger.record(round_ - 1, 120)
            store.charge_round("defaults", round_, attempt, "releasing", 120, ledger.to_dict())
            last = round_ == main
            state = TreeState(next_round=round_ + 1, discovered=found if last else (), done=last)
            store.release_round("defaults", round_, attempt, state.to_dict(),
                                {"kept": 1, "participants": 120, "threshold": 40.0}, done=last)
    finally:
        store.close()
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
