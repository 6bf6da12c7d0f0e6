"""The note on completion rounds the devices cannot budget says which items come back cut as
the run will cut them: with none left, those longer than max_bits, which the main rounds'
segments are then planned to reach; with some left, those the main rounds leave unended,
whose segments are adaptive and reach as far as their lists allow, fewer or more bits than
max_bits (52 of 60 for 1,200 devices of odd items under `fedhh up`, 74 for 20,000 under
`fedhh simulate`). Before, both said "items longer than the 60 bits the main rounds cover"."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from fedhh.cli.admin import dropped_completions
from fedhh.config import RunConfig, with_most_completions
from fedhh_coordinator.runs import open_ledger


def test_with_some_completion_rounds_left_no_main_width_is_claimed() -> None:
    asked = RunConfig()
    note = dropped_completions(asked, replace(asked, completion_rounds=7), "--devices")
    assert note.startswith("7 of the 32 completion rounds (the default) can be budgeted")
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


@pytest.mark.parametrize(("n_min", "eps_agg", "named"),
                         [(100, 1.0, 1.08), (300, 0.5, 0.596)])
def test_the_eps_agg_named_is_the_least_to_three_digits(n_min: int, eps_agg: float,
                                                        named: float) -> None:
    """The figure is the least of 3 significant digits at which the planner budgets one round
    more: one unit less in its third digit budgets none more. Before, the forward bound with
    1% more, rounded up to two decimals: 1.09 and 0.61, 0.9% and 2.3% above the least."""
    asked = RunConfig(min_devices=n_min, eps_agg=eps_agg)
    stored, _ = with_most_completions(asked, open_ledger, lambda ledger: ledger.eps_local)
    note = dropped_completions(asked, stored, "--devices")
    found = re.search(r"\(--eps-agg ([0-9.]+) budgets", note)
    assert found and float(found.group(1)) == named, note
    unit = 10 ** (math.floor(math.log10(named)) - 2)
    for eps, more in ((named, True), (named - unit, False)):
        rerun, _ = with_most_completions(replace(asked, eps_agg=eps), open_ledger,
                                         lambda ledger: ledger.eps_local)
        assert (rerun.completion() > stored.completion()) is more, eps
