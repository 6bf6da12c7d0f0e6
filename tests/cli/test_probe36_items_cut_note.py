"""A row of ``fedhh simulate``'s cut prefixes that stands for several cut prefixes (they show
the same text: ``fedhh.server.prefixtree.shown_items``) carries its note, as a heavy hitter's
row does: its estimate is their sum. Before, the console dropped it from the cut list, and
the summed estimate read as one prefix's."""

from __future__ import annotations

import pytest

from fedhh.cli.simulate import print_summary

NOTE = ("2 cut prefixes show this text (they differ only after its last byte); the estimate "
        "is their sum")


def _payload() -> dict:
    cut = [{"item": "https://example.com/\\xe6…", "estimate": 300.0, "std": 20.0, "round": 9,
            "truncated": True, "ended": False, "bits": 200, "note": NOTE,
            "cause": "no rounds left"},
           {"item": "東京\\xe9…", "estimate": 90.0, "std": 9.0, "round": 8, "truncated": True,
            "ended": False, "bits": 150, "note": "", "cause": "lost in round 9"}]
    return {"dataset": {"name": "d", "users": 10, "vocabulary": 3},
            "privacy": {"eps_agg": 1.0}, "rounds": [], "heavy_hitters": [],
            "earlier_runs": [], "cut_prefixes": cut, "deny_list": [], "metrics": {},
            "timings": {"total_s": 1.0, "rounds_s": 1.0}}


def test_cut_rows_carry_their_note(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(_payload(), top=20)
    lines = capsys.readouterr().out.splitlines()
    url = next(line for line in lines if "https://example.com/\\xe6…" in line)
    assert f"({NOTE})" in url and "300" in url
    tokyo = next(line for line in lines if "東京\\xe9…" in line)
    assert "cut prefixes show this text" not in tokyo
