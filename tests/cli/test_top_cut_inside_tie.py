"""The line under a heavy-hitter list cut at --top says when the cut falls inside a tie: rows
of the last listed row's round that show its estimate, kept or hidden for an order the console
does not show (a networked run's discrete noise released +7 and ７ at 48.2 both, in round 3)."""
from __future__ import annotations

from typing import Any

from fedhh.cli.simulate import more_hitters


def _row(item: str, estimate: float, round_: int) -> dict[str, Any]:
    return {"round": round_, "item": item, "truncated": False, "estimate": estimate, "std": 7.0}


def test_a_cut_inside_a_tie_is_stated_with_the_tied_rows_hidden() -> None:
    rows = [_row("7", 60.0, 3), _row("+7", 48.2, 3), _row("７", 48.2, 3), _row("007", 48.2, 3),
            _row("٧", 30.0, 3)]
    assert more_hitters(rows, 2) == (
        "(3 more, found in round 3; 2 of them also show 48 in round 3, as the last row listed: "
        "the cut falls inside that tie: --top 5 or --json lists them)")


def test_the_tie_is_what_the_console_shows_and_in_the_same_round_only() -> None:
    # 48.4 and 47.6 both show as 48 (the list rounds to whole counts); round 4 is another round
    rows = [_row("b", 48.4, 3), _row("a", 48.2, 3), _row("c", 47.6, 3), _row("d", 48.0, 4)]
    assert more_hitters(rows, 1) == (
        "(3 more, found in rounds 3 to 4; 2 of them also show 48 in round 3, as the last row "
        "listed: the cut falls inside that tie: --top 4 or --json lists them)")
    assert more_hitters(rows, 3) == "(1 more, found in round 4: --top 4 or --json lists them)"
