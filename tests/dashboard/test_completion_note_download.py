"""The dashboard's JSON download carries ``completion_note``: the note `fedhh simulate` and
`fedhh up` print when the completion rounds lost many prefixes (``lost_in_completion_note``),
for the whole run whatever the filter; "" when few were lost. The run's page says it after the
cut prefixes. Before, a user reading the download or the page of a run of URLs was told nothing
of --completion-weight."""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path

from dashboard_kit import Served

from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.server.causes import lost_in_completion_note
from fedhh.server.prefixtree import Found, TreeState
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.store import Store

# Completion rounds that 100 devices can budget (128-bit codes): all four at eps_agg 3 (at 1,
# since the completion weights of 2026-12-05, only the first)
CONFIG = RunConfig(completion_rounds=4, completion_weight=1.0, eps_agg=3.0)
MAIN = CONFIG.rounds
THRESHOLDS = {r: 50.0 if r <= MAIN else 429.0 for r in range(1, MAIN + 3)}
WHOLE = [f"w{i}" for i in range(20)]  # (19 lost beside 20 completed are not most)
CUT_BITS = 80  # the prefixes the first completion round kept: "https://aNN.examp…"


def stored_run(db: Path, run_id: str, lost: int, found_in: int = MAIN + 1) -> None:
    """A done run: WHOLE found in round ``found_in`` (by default the first completion round),
    and ``lost`` URL prefixes the first completion round kept and the second lost (each
    ``lost in round MAIN + 2``)."""
    store = Store(db)
    try:
        row = asyncio.run(create_run(store, CONFIG, run_id))
        parts = RunParts.load(row)
        codec, ledger = parts.tree.codec, parts.ledger
        urls = [f"https://a{i:02d}.example.com/some/long/path" for i in range(lost)]
        whole = cw.to_ints(codec.encode_many(WHOLE).codes)
        cut = [code >> (codec.max_bits - CUT_BITS) << (codec.max_bits - CUT_BITS)
               for code in (cw.to_ints(codec.encode_many(urls).codes) if urls else [])]
        found = (*(Found(c, 90.0 - i, found_in) for i, c in enumerate(whole)),
                 *(Found(c, 70.0 - i, MAIN + 1, CUT_BITS) for i, c in enumerate(cut)))
        for round_, threshold in THRESHOLDS.items():
            attempt = store.open_round(run_id, round_)
            ledger = ledger.record(round_ - 1, 200)
            store.charge_round(run_id, round_, attempt, "releasing", 200, ledger.to_dict())
            last = round_ == max(THRESHOLDS)
            state = TreeState(next_round=round_ + 1, discovered=found if last else (),
                              done=last)
            store.release_round(run_id, round_, attempt, state.to_dict(),
                                {"kept": 1, "participants": 200, "threshold": threshold},
                                done=last)
    finally:
        store.close()


def fetched(served: Served, path: str) -> str:
    status, _, body = served.request("GET", path, headers={"Cookie": served.sign_in()})
    assert status == 200, body[:300]
    return body.decode()


def downloaded(served: Served, path: str) -> dict:
    return json.loads(fetched(served, path))


def test_many_prefixes_lost_in_completion_rounds_are_noted(served: Served) -> None:
    stored_run(served.db, "urls", 24)
    shown = downloaded(served, "/runs/urls/heavy-hitters.json")
    assert len(shown["heavy_hitters"]) == len(WHOLE) and len(shown["cut_prefixes"]) == 24
    assert {h["cause"] for h in shown["cut_prefixes"]} == {f"lost in round {MAIN + 2}"}
    expected = lost_in_completion_note([f"lost in round {MAIN + 2}"] * 24,
                                       [(MAIN + 1, False)] * len(WHOLE), MAIN,
                                       CONFIG.completion_weight, THRESHOLDS)
    assert expected and shown["completion_note"] == expected
    # (the run's note, not the filtered rows')
    filtered = downloaded(served, "/runs/urls/heavy-hitters.json?q=a07")
    assert len(filtered["cut_prefixes"]) == 1 and filtered["completion_note"] == expected
    assert f'<p class="note completion">Note: {html.escape(expected)}</p>' in fetched(
        served, "/runs/urls")


def test_few_prefixes_lost_leave_the_field_empty(served: Served) -> None:
    stored_run(served.db, "few", 19)
    assert downloaded(served, "/runs/few/heavy-hitters.json")["completion_note"] == ""
    assert downloaded(served, "/runs/r1/heavy-hitters.json")["completion_note"] == ""
    assert 'class="note completion"' not in fetched(served, "/runs/few")


def test_prefixes_lost_with_none_completed_are_noted_however_few(served: Served) -> None:
    """WHOLE found in a main round, 5 URL prefixes lost in the completion rounds: they lost all
    they took in. Before, below 20 lost the page and the download said nothing."""
    stored_run(served.db, "all-lost", 5, found_in=2)
    note = downloaded(served, "/runs/all-lost/heavy-hitters.json")["completion_note"]
    assert note.startswith("5 prefixes were lost in the completion rounds")
    assert 'class="note completion"' in fetched(served, "/runs/all-lost")
