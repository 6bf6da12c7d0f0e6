"""``fedhh simulate --top 0`` (accepted: the lists hidden, the tables and figures kept) says
under each list's heading that it lists none and what does. Before, a heading such as
"10 heavy prefixes the completion rounds could not complete (...):" ended its section with
nothing after it, which read as a list lost."""

from __future__ import annotations

import pytest

from fedhh.cli.simulate import print_summary

TOP_ZERO = "(none listed at --top 0: --top N or --json lists them)"


def _hit(item: str, round_: int, **more: object) -> dict:
    return {"item": item, "estimate": 90.0, "std": 9.0, "round": round_, "truncated": False,
            "ended": True, "bits": 60, "note": "", **more}


@pytest.mark.parametrize("top", [0, 5])
def test_each_list_says_it_lists_none_at_top_zero(
        capsys: pytest.CaptureFixture[str], top: int) -> None:
    payload = {"dataset": {"name": "d", "users": 10, "vocabulary": 3},
               "privacy": {"eps_agg": 1.0}, "rounds": [],
               "earlier_runs": [_hit("-0.001", 1)],
               "heavy_hitters": [_hit("alice+news@example.com", 7), _hit("👩🏽‍💻", 6)],
               "cut_prefixes": [_hit("https://ex⟨+3 bits⟩…", 4, truncated=True, ended=False,
                                     cause="lost in round 5")],
               "deny_list": [], "metrics": {}, "timings": {"total_s": 1.0, "rounds_s": 1.0}}
    print_summary(payload, top=top)
    out = capsys.readouterr().out
    assert out.count(TOP_ZERO) == (3 if top == 0 else 0)
    assert ("alice+news@example.com" in out) == (top > 0)
    if top == 0:
        lines = out.splitlines()
        for heading in ("heavy hitter found by the first run", "heavy hitters discovered",
                        "heavy prefix"):
            at = next(i for i, line in enumerate(lines) if heading in line)
            assert lines[at + 1] == TOP_ZERO
