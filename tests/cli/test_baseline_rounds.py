"""`fedhh simulate` says when a baseline's tree ended before the rounds its privacy was set for.

Before: the README's `fedhh simulate --algorithm triehh++ --codec 5bit --rounds 12` took
OptPrefixTree's adaptive segments, ran 4 rounds (23, 16, 18 and 3 bits) and found 240 items,
its sampling rate set for 12 rounds; nothing said that 8 rounds' budget went unused, nor that
--segment-bits 5 (a letter a round, the paper's TrieHH++) runs all 12 (573 items found).
OptPrefixTree charges only the rounds it runs, and is not told so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_kit import run_cli

from fedhh.cli.simulate import unused_baseline_rounds


def payload(algorithm: str, ran: int, charged: int | None, segment_bits: int | None = None,
            codec: str = "5bit") -> dict[str, Any]:
    privacy = {"eps_agg": 1.0} if charged is None else {"charged_rounds": charged}
    return {"config": {"algorithm": algorithm, "segment_bits": segment_bits, "codec": codec},
            "privacy": privacy, "rounds": [{"round": r + 1} for r in range(ran)]}


def test_an_adaptive_trie_that_ended_early_is_told_with_the_fixed_segments() -> None:
    assert unused_baseline_rounds(payload("triehh++", 4, 12)) == (
        "The tree finished after 4 of 12 rounds, and triehh++'s privacy was set for all 12: "
        "the budget of the 8 not run went unused. Fixed segments take every round: "
        "--segment-bits 5, a letter a round of the 5bit code as in the paper.")


def test_the_letter_hint_is_the_5bit_codes_alone() -> None:
    told = unused_baseline_rounds(payload("central-gaussian", 1, 12, codec="unicode"))
    assert told is not None and told.endswith(
        "the budget of the 11 not run went unused. Fixed segments (--segment-bits B) take "
        "every round.")
    fixed = unused_baseline_rounds(payload("triehh", 10, 12, segment_bits=5))
    assert fixed is not None and fixed.endswith("the 2 not run went unused.")


@pytest.mark.parametrize("case", [("optprefixtree", 4, 36), ("triehh", 12, 12),
                                  ("triehh", 3, None)])
def test_nothing_is_told_when_no_round_was_paid_for_and_not_run(
        case: tuple[str, int, int | None]) -> None:
    assert unused_baseline_rounds(payload(*case)) is None


def test_the_summary_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on a few words: the 5bit code's 60 bits in adaptive segments end before
    12 rounds."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.txt"
    users.write_text("".join(f"{['apple', 'pear', 'fig'][u % 3]}\n" for u in range(3000)))
    code, out, err = run_cli(["simulate", "--dataset", str(users), "--algorithm", "triehh++",
                              "--codec", "5bit", "--rounds", "12", "--eps-agg", "8",
                              "--seed", "1"], capsys)
    assert code == 0, err
    assert "The tree finished after " in out and " of 12 rounds, and triehh++'s privacy was " \
        "set for all 12" in out and "--segment-bits 5, a letter a round" in out
