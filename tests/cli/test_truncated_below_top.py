"""The console's heavy-hitter list says when items it leaves below --top came back truncated:
the last rounds find them, so at the default --top all of them can be below the cut."""
from __future__ import annotations

from typing import Any

import pytest

from fedhh.cli.simulate import _hitters_table, more_hitters


def _hitters() -> list[dict[str, Any]]:
    whole = [{"round": 1, "item": w, "truncated": False, "estimate": 500.0, "std": 20.0}
             for w in ("a", "ab", "abc")]
    cut = [{"round": 4, "item": text, "truncated": True, "bits": 60, "estimate": 900.0,
            "std": 30.0} for text in ("https://example…", "a.b+tag…")]
    return whole + cut


def test_the_line_under_a_list_counts_the_truncated_it_hides() -> None:
    assert more_hitters(_hitters(), 2) == (
        "(3 more, found in rounds 1 to 4, 2 of them truncated; 1 of them also shows 500 in "
        "round 1, as the last row listed: the cut falls inside that tie: --top 5 or --json "
        "lists them)")
    assert more_hitters(_hitters(), 3) == (
        "(2 more, found in round 4, 2 of them truncated: --top 5 or --json lists them)")


def test_the_truncation_note_is_said_when_every_truncated_item_is_below_top(
        capsys: pytest.CaptureFixture[str]) -> None:
    _hitters_table(_hitters(), 3, "HINT")
    out = capsys.readouterr().out
    assert "https://" not in out  # (below the cut)
    assert "(an item ending in … was truncated at 60 bits, the code's width" in out
    assert out.rstrip().endswith("; HINT)")
