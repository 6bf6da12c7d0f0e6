"""``fedhh simulate``'s rounds table shows each round's threshold, the estimate an element had to
clear in devices, as `fedhh up`'s does: the cut prefixes' heading sends the reader to "the
rounds table" for the later, cheaper round's threshold that lost an item. Before, the table
showed tau alone, the multiplier: a URL lost in the first completion round (its threshold 514
of 20,000 devices, the main rounds' ~60) read as lost for no shown reason."""

from __future__ import annotations

import math

import pytest

from fedhh.cli.simulate import print_summary


def _round(number: int, threshold: float | None, kept: int) -> dict:
    return {"round": number, "segment_bits": 18, "prefixes": 30, "domain_size": 7864320,
            "participants": 20000, "tau": 5.1, "threshold": threshold, "kept": kept,
            "finished": 1, "next_segment_bits": 18, "expected_false_positives": 0.5,
            "actual_false_positives": 0, "extra": {}}


def test_each_rounds_threshold_is_a_column(capsys: pytest.CaptureFixture[str]) -> None:
    cut = {"item": "https://ex⟨+3 bits⟩…", "estimate": 485.0, "std": 25.0, "round": 4,
           "truncated": True, "ended": False, "bits": 77, "note": "",
           "cause": "lost in round 5"}
    payload = {"dataset": {"name": "d", "users": 20000, "vocabulary": 3},
               "privacy": {"eps_agg": 1.0},
               "rounds": [_round(4, 61.6, 37), _round(5, 1514.2, 3), _round(6, math.nan, 0),
                          _round(7, None, 0)],
               "earlier_runs": [], "heavy_hitters": [], "cut_prefixes": [cut],
               "deny_list": [], "metrics": {}, "timings": {"total_s": 1.0, "rounds_s": 1.0}}
    print_summary(payload, top=20)
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("round"))
    column = header.split().index("threshold")
    assert header.split()[column - 1] == "tau"
    rows = [line.split() for line in lines[lines.index(header) + 1:][:4]]
    assert [row[column] for row in rows] == ["62", "1,514", "-", "-"]
    assert "the rounds table shows each round's" in "\n".join(lines)
