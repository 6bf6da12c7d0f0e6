"""The run page's heavy-hitter list of a run not done says it is its released rounds' so far,
as the consoles (``unfinished_results``), the CSV's run_state and the JSON's state say it
(before, a failed or cancelled run's list read as a finished run's on the page)."""

from __future__ import annotations

import math

import pytest

from fedhh_coordinator.dashboard.pages import hits_table
from fedhh_coordinator.dashboard.results import Hit

WHOLE = Hit(rank=1, item="apple", estimate=10.0, std=math.nan, round=1)


@pytest.mark.parametrize("state, what", [("failed", "The run failed"),
                                         ("cancelled", "The run was cancelled"),
                                         ("running", "The run is still running")])
def test_a_run_not_done_says_its_list_is_so_far(state: str, what: str) -> None:
    page = str(hits_table("r1", [WHOLE], (), state, 2))
    assert (f"{what}: these are what its 2 released rounds found so far, not a finished "
            "run's list.") in page
    assert page.index("so far") < page.index("apple")
    assert "1 released round found" in str(hits_table("r1", [WHOLE], (), state, 1))


def test_a_done_run_says_nothing_of_the_kind() -> None:
    assert "so far" not in str(hits_table("r1", [WHOLE], (), "done", 3))
    assert "so far" not in str(hits_table("r1", [WHOLE]))


def test_an_empty_list_says_yet_only_of_a_run_that_may_still_find() -> None:
    assert "No heavy hitter found yet." in str(hits_table("r1", [], (), "running", 1))
    assert str(hits_table("r1", [], (), "failed", 2)) == (
        '<p class="empty">No heavy hitter: the run failed after 2 released rounds.</p>')
    assert str(hits_table("r1", [], (), "done", 3)) == '<p class="empty">No heavy hitter.</p>'
