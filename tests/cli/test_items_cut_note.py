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
    assert url.endswith(f"no rounds left; {NOTE}") and "300" in url
    tokyo = next(line for line in lines if "東京\\xe9…" in line)
    assert "cut prefixes show this text" not in tokyo


def _truncated_payload(privacy: dict) -> dict:
    payload = _payload()
    payload.update(cut_prefixes=[], privacy=privacy, heavy_hitters=[
        {"item": "user@exam…", "estimate": 100.0, "std": 16.0, "round": 3, "truncated": True,
         "ended": False, "bits": 60, "note": ""}])
    return payload


@pytest.mark.parametrize(("privacy", "blocker", "said"), [
    # (1,500 devices at eps_agg 1: eps_local 3.8, and a completion round's eps_local + ln 0.02
    # would not be positive; --completion-rounds, which the note named, changes nothing)
    ({"eps_agg": 1.0, "completion_rounds": "0 of 32: the later completion rounds' weights "
      "(from 0.02, halved as the round's index doubles) cannot be budgeted among 1500 devices"},
     None, "could not be budgeted among so few devices"),
    ({"eps_agg": 1.0}, "--algorithm triehh", "do not run with --algorithm triehh"),
    ({"eps_agg": 1.0}, None, "see --max-bits and --completion-rounds"),
])
def test_a_truncated_items_note_says_what_widens_the_codes(
        capsys: pytest.CaptureFixture[str], privacy: dict, blocker: str | None,
        said: str) -> None:
    print_summary(_truncated_payload(privacy), top=20, blocker=blocker)
    note = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("(an item ending in … was truncated at 60 bits"))
    assert said in note
    assert ("--completion-rounds" in note) == (said == "see --max-bits and --completion-rounds")


def test_a_prefix_at_the_codes_limit_says_so() -> None:
    """A 300-capital item held by 60% of 2,000 devices (--completion-rounds 48, eps_agg 8)
    reached 1,024 bits in round 45 of 52 and read "no rounds left", and the heading's "more
    --completion-rounds" cannot widen the codes past their limit."""
    from fedhh.cli.simulate import cut_cause

    assert cut_cause(178, 4096, 4096, last=178) == "the codes' limit, 4,096 bits"
    assert cut_cause(170, 4096, 4096, last=178) == "the codes' limit, 4,096 bits"
    assert cut_cause(45, 1024, 1024, last=45) == "no rounds left"  # (the limit was 1,024)
    assert cut_cause(36, 1010, 1012, last=36) == "no rounds left"  # (40 rounds: 12 bits more)
    assert cut_cause(7, 400, 1024, last=20) == "lost in round 8"
