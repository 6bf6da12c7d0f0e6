"""``fedhh simulate``'s lists keep their item column at most 48 columns wide (or the heading's):
a long item (a URL the completion rounds found whole, up to 1,024 bits) pushes only its own
row on, and a row's note comes last, pushing nothing. Before, every row was padded to the
longest, so one 150-column URL made each row of the list 160 columns, wrapped on any
terminal."""

from __future__ import annotations

import pytest

from fedhh.cli.simulate import ITEM_COLUMNS_MAX, print_summary
from fedhh.codec.shown import columns

LONG = "https://example.com/" + "a" * 130


def _payload() -> dict:
    def hit(item: str, estimate: float, round_: int, **more: object) -> dict:
        return {"item": item, "estimate": estimate, "std": 9.0, "round": round_,
                "truncated": False, "ended": True, "bits": 60, "note": "", **more}

    cut = [hit("東京\\xe9…", 90.0, 8, truncated=True, ended=False, cause="lost in round 9"),
           hit("wait…", 80.0, 8, truncated=True, ended=False, cause="no rounds left",
               note="2 cut prefixes show this text (they differ only after its last byte); "
                    "the estimate is their sum")]
    return {"dataset": {"name": "d", "users": 10, "vocabulary": 3},
            "privacy": {"eps_agg": 1.0}, "rounds": [], "earlier_runs": [],
            "heavy_hitters": [hit("new", 100.0, 1), hit(LONG, 95.0, 20), hit("東京", 50.0, 3)],
            "cut_prefixes": cut, "deny_list": [], "metrics": {},
            "timings": {"total_s": 1.0, "rounds_s": 1.0}}


def test_a_long_item_pushes_only_its_own_row(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(_payload(), top=20)
    lines = capsys.readouterr().out.splitlines()
    new = next(line for line in lines if " new " in line)
    assert len(new) <= ITEM_COLUMNS_MAX + 30
    assert next(line for line in lines if LONG in line).split(LONG)[1].split() == [
        "95", "9", "20"]
    # the short rows keep their columns: their counts end where the heading's do
    head = next(line for line in lines if line.lstrip().startswith("#"))
    assert len(new) == len(head)
    cut_head = next(line for line in lines if line.rstrip().endswith("why"))
    tokyo = next(line for line in lines if "東京\\xe9…" in line)
    assert tokyo.index("東京") < ITEM_COLUMNS_MAX
    assert len(cut_head) <= ITEM_COLUMNS_MAX + 50
    assert "the estimate is their sum" in next(line for line in lines if "wait…" in line)


def test_a_rows_note_keeps_its_counts_in_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A note comes last, after the cause (cut prefixes) or in a note column (heavy
    hitters): in the item's cell it pushed its row's estimate, std and round to the right of
    the other rows'."""
    payload = _payload()
    payload["heavy_hitters"][2]["note"] = ("2 cut prefixes show this text (they differ only "
                                           "after its last byte); the estimate is their sum")
    print_summary(payload, top=20)
    lines = capsys.readouterr().out.splitlines()

    def round_ends(line: str, after: str) -> int:
        """The column where the row's round ends: before its cause or note."""
        return columns(line[:line.index(after)].rstrip())

    cut_head = next(line for line in lines if line.rstrip().endswith("why"))
    wait = next(line for line in lines if "wait…" in line)
    tokyo = next(line for line in lines if "東京\\xe9…" in line)
    assert round_ends(wait, "no rounds left") == round_ends(cut_head, "why") \
        == round_ends(tokyo, "lost in round 9")
    assert wait.endswith("no rounds left; 2 cut prefixes show this text (they differ only "
                         "after its last byte); the estimate is their sum")
    head = next(line for line in lines if line.lstrip().startswith("#"))
    noted = next(line for line in lines if "東京" in line and "2 cut" in line)
    new = next(line for line in lines if " new " in line)
    assert round_ends(noted, "2 cut") == round_ends(head, "note") == columns(new.rstrip())
