"""Why a finished run needed fewer rounds than planned, as the dashboard says it: a run whose
last round kept no prefix says so; before, it read "every item was complete" with its heavy
prefixes listed as cut below (a networked run of URLs and emoji: "5 of 11 rounds (every item
was complete: the rest were not needed)")."""

from __future__ import annotations

import asyncio
import re

from dashboard_kit import Served
from networked_kit import run_config

from fedhh.rpc.run_config import from_proto
from fedhh.server.prefixtree import TreeState
from fedhh_coordinator.runs import RunParts, create_run


def test_a_run_whose_last_round_kept_nothing_says_so(served: Served) -> None:
    store = served.views.store
    config = from_proto(run_config(rounds=4, max_bits=60, min_devices=180, dim_limit=1 << 16))
    row = asyncio.run(create_run(store, config, "r-emptied"))
    ledger = RunParts.load(row).ledger
    for round_, kept in ((1, 3), (2, 0)):
        attempt = store.open_round("r-emptied", round_)
        ledger = ledger.record(round_ - 1, 190)
        store.charge_round("r-emptied", round_, attempt, "releasing", 190, ledger.to_dict())
        state = TreeState(next_round=round_ + 1, prefix_bits=10 * round_,
                          prefixes=(1, 2) if kept else (), segment_bits=5 if kept else 0,
                          done=not kept)
        store.release_round("r-emptied", round_, attempt, state.to_dict(),
                            {"kept": kept, "finished": 0, "threshold": 20.5,
                             "expected_false_positives": 0.4, "impossible": 0, "denied": 0,
                             "participants": 190}, done=not kept)
    store.set_run_state("r-emptied", "done")
    session = {"Cookie": served.sign_in()}
    said = "2 of 4 rounds (round 2 kept no prefix, so none was left to extend: the rest were " \
           "not needed)"
    for path in ("/", "/runs/r-emptied"):
        status, _, body = served.request("GET", path, headers=session)
        assert status == 200 and said in body.decode(), path
    # (r1, whose last round kept its prefixes and finished them, keeps its words)
    status, _, body = served.request("GET", "/runs/r1", headers=session)
    assert re.search(r"2 of 4 rounds \(every item was complete: the rest were not needed\)",
                     body.decode())
