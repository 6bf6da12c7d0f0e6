"""The note on completion rounds the devices cannot budget says which items come back cut as
the run will cut them: with none left, those longer than max_bits, which the main rounds'
segments are then planned to reach; with some left, those the main rounds leave unended,
whose segments are adaptive and reach as far as their lists allow, fewer or more bits than
max_bits (52 of 60 for 1,200 devices of odd items under `fedhh up`, 74 for 20,000 under
`fedhh simulate`). Before, both said "items longer than the 60 bits the main rounds cover"."""

from __future__ import annotations

from dataclasses import replace

from fedhh.cli.admin import dropped_completions
from fedhh.config import RunConfig


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
