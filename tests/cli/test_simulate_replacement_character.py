"""``fedhh simulate``'s lists show an item holding U+FFFD with it escaped (``caf\\ufffd``,
fedhh.codec.shown), a heavy hitter and a cut prefix alike. Before, they showed ``caf�``, what a
terminal draws for bytes it cannot read."""

from __future__ import annotations

import pytest

from fedhh.cli.simulate import print_summary


def test_simulate_lists_it_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    def hit(item: str, round_: int, **more: object) -> dict:
        return {"item": item, "estimate": 300.0, "std": 17.0, "round": round_,
                "truncated": False, "ended": True, "bits": 40, "note": "", **more}

    print_summary({
        "dataset": {"name": "d", "users": 600, "vocabulary": 2}, "privacy": {"eps_agg": 8.0},
        "rounds": [], "earlier_runs": [], "deny_list": [], "metrics": {},
        "heavy_hitters": [hit("caf\ufffd", 2), hit("caf\u00e9", 2)],
        "cut_prefixes": [hit("\ufffd\ufffd\\xe2\u2026", 3, truncated=True, ended=False,
                             cause="no rounds left")],
        "timings": {"total_s": 1.0, "rounds_s": 1.0}}, top=20)
    out = capsys.readouterr().out
    rows = out.splitlines()
    assert any(row.split()[1:2] == ["caf\\ufffd"] for row in rows), rows
    assert any(row.split()[:1] == ["\\ufffd\\ufffd\\xe2\u2026"] for row in rows), rows
    assert "\ufffd" not in out
