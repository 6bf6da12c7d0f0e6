"""``fedhh simulate``'s lists keep their item column at most 48 columns wide (or the heading's):
a long item (a URL the completion rounds found whole, up to 1,024 bits) or a cut prefix's
note pushes only its own row on. Before, every row was padded to the longest, so one
150-column URL made each row of the list 160 columns, wrapped on any terminal."""

from __future__ import annotations

import pytest

from fedhh.cli.simulate import ITEM_COLUMNS_MAX, print_summary

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
