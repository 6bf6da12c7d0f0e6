"""Where the run's --max-eps-local, not its eps_agg or n_min, ends the completion rounds, the
notes say so: the coordinator holds eps_local to that cap (``open_ledger``), and one round more
gets no positive epsilon even there, so a larger --eps-agg or more devices budget no more.
Before, the results' note and `fedhh admin start`'s advised both: --max-eps-local 4 at n_min
1,000 budgets 3 completion rounds at eps_agg 8 and at 16 (the 4th runs at 4 + ln 0.0125 < 0)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fedhh.cli.admin import dropped_completions
from fedhh.config import RunConfig
from fedhh.errors import PrivacyError
from fedhh.server.causes import NO_MORE_COMPLETION, completion_budget_note, ran_out_cause
from fedhh_coordinator.runs import open_ledger

ASKED = RunConfig(max_eps_local=4.0, min_devices=1000, eps_agg=8.0)
KEPT = replace(ASKED, completion_rounds=3)  # what the planner stores (with_most_completions)
OLD_ADVICE = "A larger --eps-agg or more devices (a larger n_min) budget more"


def test_the_results_note_names_the_cap() -> None:
    eps_local = open_ledger(KEPT).eps_local
    assert eps_local == ASKED.max_eps_local  # (held there: the solve at eps_agg 8 gives more)
    cause = ran_out_cause(KEPT, eps_local)
    assert cause == NO_MORE_COMPLETION
    note = completion_budget_note(KEPT, eps_local, [cause])
    assert note is not None and OLD_ADVICE not in note, note
    assert ("One completion round more gets no positive epsilon even at --max-eps-local 4, the "
            "most eps_local the run may take (4 + ln 0.0125 <= 0), so a larger --eps-agg or "
            "more devices budget no more until --max-eps-local is raised") in note, note


def test_a_larger_eps_agg_or_more_devices_budget_no_more_and_a_larger_cap_does() -> None:
    # (what the note says, checked by the planner's own ledger)
    with pytest.raises(PrivacyError, match="must be a positive"):
        open_ledger(replace(ASKED, completion_rounds=4, eps_agg=16.0, min_devices=100_000))
    assert open_ledger(replace(ASKED, completion_rounds=4, max_eps_local=5.0)).eps_local == 5.0


def test_the_start_note_names_the_cap_and_no_eps_agg() -> None:
    note = dropped_completions(ASKED, KEPT, "--min-devices")
    assert note.startswith("3 of the 32 completion rounds (the default) can be budgeted")
    assert "budget no more until --max-eps-local is raised" in note, note
    assert "a larger --eps-agg budget more" not in note and "(--eps-agg " not in note, note


def test_a_simulation_has_no_cap_and_no_n_min() -> None:
    # (fedhh simulate solves eps_local uncapped at the dataset's users: max_eps_local and
    # n_min are the networked run's, and simulate has no flag for either; before, its note
    # said "(a larger n_min)")
    note = completion_budget_note(KEPT, 4.0, [NO_MORE_COMPLETION], networked=False)
    assert note is not None and note.endswith(
        "A larger --eps-agg or more devices (users in the dataset) budget more; "
        "docs/codecs.md."), note
