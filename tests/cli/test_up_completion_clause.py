"""`fedhh up`'s run line names what its completion rounds do, not a length the main rounds may
not reach (with completion rounds, their segments are adaptive)."""
from dataclasses import replace

from fedhh.cli.up import completion_clause
from fedhh.config import RunConfig


def test_the_run_line_says_the_completion_rounds_complete_what_the_main_rounds_leave() -> None:
    stored = RunConfig()
    assert stored.completion() > 0
    clause = completion_clause(stored)
    assert f"the last {stored.completion()} completing the items the main rounds leave unended" \
        in clause
    assert "longer than" not in clause


def test_no_completion_rounds_no_clause() -> None:
    assert completion_clause(replace(RunConfig(), completion_rounds=0)) == ""
