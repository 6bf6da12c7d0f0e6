"""`fedhh simulate` says when the completion rounds lost many prefixes, and what gives them more
of the budget (--completion-weight); where they lost few, it says nothing."""

from __future__ import annotations

from typing import Any

from fedhh.cli.simulate import completion_weight_note


def _payload(lost: int, found: int, lost_in: int = 5) -> dict[str, Any]:
    rounds = [{"round": r, "threshold": 50.0 if r <= 4 else 429.0, "extra": {"run": 1}}
              for r in range(1, 9)]
    return {"config": {"rounds": 4, "completion_weight": 0.02}, "rounds": rounds,
            "heavy_hitters": [{}] * found,
            "cut_prefixes": [{"cause": f"lost in round {lost_in}"}] * lost
            + [{"cause": "no rounds left"}] * 50}


def test_many_prefixes_lost_in_completion_rounds_are_told_with_the_remedy() -> None:
    assert completion_weight_note(_payload(lost=355, found=327)) == (
        "355 prefixes were lost in the completion rounds (threshold 429 against the last main "
        "round's 50): they run at --completion-weight 0.02 of a main round's budget, set for "
        "words. A larger weight (0.2, 0.5) completes more long items (URLs, e-mail addresses) "
        "at the main rounds' cost; docs/codecs.md.")


def test_few_lost_or_lost_in_main_rounds_say_nothing() -> None:
    assert completion_weight_note(_payload(lost=19, found=10)) is None
    assert completion_weight_note(_payload(lost=100, found=9_400)) is None
    assert completion_weight_note(_payload(lost=355, found=327, lost_in=3)) is None
    assert completion_weight_note({"rounds": [], "heavy_hitters": []}) is None
