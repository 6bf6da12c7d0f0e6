"""The note on completion rounds the devices cannot budget says which items come back cut as
the run will cut them: with none left, those longer than max_bits, which the main rounds'
segments are then planned to reach; with some left, those the main rounds leave unended,
whose segments are adaptive and reach as far as their lists allow, fewer or more bits than
max_bits (52 of 60 for 1,200 devices of odd items under `fedhh up`, 74 for 20,000 under
`fedhh simulate`). Before, both said "items longer than the 60 bits the main rounds cover"."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from fedhh.cli.admin import dropped_completions
from fedhh.config import RunConfig, with_most_completions
from fedhh_coordinator.runs import open_ledger


def test_with_some_completion_rounds_left_no_main_width_is_claimed() -> None:
    asked = RunConfig()
    note = dropped_completions(asked, replace(asked, completion_rounds=7), "--devices")
    assert note.startswith("note: 7 of the 32 completion rounds (the default) can be budgeted")
    assert "bits the main rounds" not in note and f"{asked.max_bits} bits" not in note
    assert "items the main rounds leave unended" in note


def test_with_none_left_the_main_rounds_cover_max_bits() -> None:
    asked = RunConfig(max_bits=48)
    note = dropped_completions(asked, replace(asked, completion_rounds=0), "--devices")
    assert "items longer than the 48 bits the main rounds then cover come back cut" in note


@pytest.mark.parametrize(("n_min", "budgeted"), [(100, 0), (1000, 3)])
def test_the_note_names_an_eps_agg_that_budgets_one_more(n_min: int, budgeted: int) -> None:
    """The note names the --eps-agg that budgets one completion round more at the run's
    n_min, and the coordinator's planner, given it, budgets it (before, no figure: at the
    networked defaults a user tried values until one did). 100 devices at eps_agg 1 budget
    none, 1,000 budget 3."""
    asked = RunConfig(min_devices=n_min)
    stored, _ = with_most_completions(asked, open_ledger, lambda ledger: ledger.eps_local)
    assert stored.completion() == budgeted
    note = dropped_completions(asked, stored, "--devices")
    which = "one more" if budgeted else "the first"
    named = re.search(rf"\(--eps-agg ([0-9.]+) budgets {which} at {n_min} devices\)$", note)
    assert named, note
    raised = replace(asked, eps_agg=float(named.group(1)))
    assert raised.eps_agg > asked.eps_agg
    rerun, _ = with_most_completions(raised, open_ledger, lambda ledger: ledger.eps_local)
    assert rerun.completion() > budgeted
