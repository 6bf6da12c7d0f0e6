"""What the dashboard's texts say (issue 28): a finished run that needed fewer rounds says so,
and every time carries its zone."""

from __future__ import annotations

import re

from fedhh_coordinator.dashboard.pages import rounds_text, when
from fedhh_coordinator.dashboard.views import RunLine


def line(state: str, released: int, rounds: int = 4) -> RunLine:
    return RunLine("r1", state, released, rounds, "", 0.5, 1.0, 1e-6, 0.0, 1.0, "")


def test_a_run_whose_tree_finished_early_says_the_rest_were_not_needed() -> None:
    """Before: "3 of 4 rounds" for a finished run, as if one were missing."""
    assert rounds_text(line("done", 3)) == (
        "3 of 4 rounds (every item was complete: the rest were not needed)")
    assert rounds_text(line("done", 4)) == "4 of 4 rounds"
    assert rounds_text(line("running", 3)) == "3 of 4 rounds"
    assert rounds_text(line("failed", 1)) == "1 of 4 rounds"


def test_times_carry_their_zone() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Za-z+\-0-9]+", when(1.8e9))
    assert when(None) == "–"
