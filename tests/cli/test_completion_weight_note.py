"""`fedhh simulate` says when the completion rounds lost many prefixes, and what gives them more
of the budget (--completion-weight); where they lost few, it says nothing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fedhh.cli.simulate import completion_weight_note
from fedhh.cli.up import _print_results
from fedhh.config import Mode, RunConfig
from fedhh.rpc.run_config import to_proto
from fedhh.v1 import coordinator_pb2 as pb


def _payload(lost: int, found: int, lost_in: int = 5, found_in: int = 5) -> dict[str, Any]:
    """``found`` items whole from round ``found_in`` (5: the first completion round), ``lost``
    prefixes lost in round ``lost_in``."""
    rounds = [{"round": r, "threshold": 50.0 if r <= 4 else 429.0, "extra": {"run": 1}}
              for r in range(1, 9)]
    return {"config": {"rounds": 4, "completion_weight": 0.02}, "rounds": rounds,
            "heavy_hitters": [{"round": found_in}] * found,
            "cut_prefixes": [{"cause": f"lost in round {lost_in}"}] * lost
            + [{"cause": "no rounds left"}] * 50}


def test_many_prefixes_lost_in_completion_rounds_are_told_with_the_remedy() -> None:
    assert completion_weight_note(_payload(lost=355, found=327)) == (
        "355 prefixes were lost in the completion rounds (in round 5, at threshold 429 "
        "against the last main round's 50): the first runs at --completion-weight 0.02 of a "
        "main round's budget, the 2nd and 3rd at a quarter of that, the 4th to 7th at a "
        "sixteenth, the later ones at less. A larger weight (up to 1) raises each completion "
        "round's budget at the main rounds' cost (synthetic-urls: 494 URLs whole at 0.2, 686 "
        "at 1), which helps only where the rounds it brings within the devices complete items "
        "the run's do not (`fedhh up` and `fedhh simulate`, which know the items, say whether "
        "it does); a larger --eps-agg lowers every round's threshold, and more devices holding the "
        "items raise their counts faster than the thresholds; docs/codecs.md.")


def test_the_note_names_the_round_that_lost_most_and_no_larger_weight_at_1() -> None:
    """3,000 users holding 10 long URLs and addresses at eps_agg 1 and --completion-weight 1
    lost all 10 in the 4th completion round (a sixteenth of the weight, threshold 415); the
    note named the first completion round's threshold (80 against 70) and advised a weight of
    "(0.5, 1)", which the run already had."""
    payload = _payload(lost=10, found=5, lost_in=8, found_in=1)
    payload["config"]["completion_weight"] = 1.0
    payload["rounds"][7]["threshold"] = 415.0
    note = completion_weight_note(payload)
    assert note is not None and "(in round 8, at threshold 415 against" in note, note
    assert "larger weight" not in note and "(0.5, 1)" not in note
    assert "A larger --eps-agg lowers every round's threshold, and more devices" in note


def test_few_lost_or_lost_in_main_rounds_say_nothing() -> None:
    assert completion_weight_note(_payload(lost=19, found=20)) is None
    assert completion_weight_note(_payload(lost=100, found=9_400)) is None
    assert completion_weight_note(_payload(lost=355, found=327, lost_in=3)) is None
    assert completion_weight_note({"rounds": [], "heavy_hitters": []}) is None
    assert completion_weight_note(_payload(lost=0, found=3, found_in=2)) is None


def test_one_prefix_lost_is_told_as_one() -> None:
    # (one lost, none completed: before, "1 prefixes were lost in the completion rounds (most
    # in round 5", as `fedhh simulate` printed it for 400 users holding one long URL)
    note = completion_weight_note(_payload(lost=1, found=0))
    assert note and note.startswith(
        "1 prefix was lost in the completion rounds (in round 5, at threshold 429 "), note


def test_most_in_a_round_only_where_other_rounds_lost_some_too() -> None:
    # (before, every prefix lost in round 5 alone read "(most in round 5")
    spread = _payload(lost=30, found=10)
    spread["cut_prefixes"] += [{"cause": "lost in round 8"}] * 12
    note = completion_weight_note(spread)
    assert note and note.startswith(
        "42 prefixes were lost in the completion rounds (most in round 5, at threshold 429 "), note
    note = completion_weight_note(_payload(lost=30, found=10))
    assert note and note.startswith(
        "30 prefixes were lost in the completion rounds (in round 5, at threshold 429 "), note


def test_losing_more_than_completed_is_told_however_few() -> None:
    """The completion rounds lost more prefixes than they completed items: noted however few.
    Before, below 20 lost nothing was said: 2,000 users holding 7 long items (URLs, e-mail
    addresses, a ZWJ family) found 3 words and lost 5 prefixes (simulate), or completed one
    short word and lost 5 (over the network)."""
    note = completion_weight_note(_payload(lost=5, found=3, found_in=2))
    assert note and note.startswith("5 prefixes were lost in the completion rounds")
    one_completed = _payload(lost=5, found=4, found_in=2)
    one_completed["heavy_hitters"][-1] = {"round": 5}
    assert completion_weight_note(one_completed) is not None
    assert completion_weight_note(_payload(lost=5, found=5)) is None
    assert completion_weight_note(_payload(lost=19, found=10, found_in=4)) is not None
    # (a truncated row from round 5 was not completed)
    truncated = _payload(lost=5, found=3)
    truncated["heavy_hitters"] = [{"round": 5, "truncated": True}] * 3
    assert completion_weight_note(truncated) is not None


def test_fedhh_up_gives_the_note_of_a_run_that_lost_many_prefixes_in_completion_rounds(
        capsys: pytest.CaptureFixture[str]) -> None:
    config = RunConfig(rounds=4, completion_rounds=4).validate(Mode.NETWORK)
    rounds = [pb.RoundSummary(round=i, attempt=1, state="released", participants=1000,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=1,
                              threshold=50.0 if i <= 4 else 429.0)
              for i in range(1, 9)]
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=4.0,
                          rounds_released=8, config=to_proto(config), rounds=rounds)
    cut = [pb.HeavyHitter(item=f"https://example{i}…", estimate=500.0, round=4, truncated=True,
                          bits=52) for i in range(30)]
    found = [pb.HeavyHitter(item=f"https://site{i}/", estimate=900.0, round=8) for i in range(10)]
    _print_results(run, SimpleNamespace(heavy_hitters=found, cut_prefixes=cut))
    assert ("30 prefixes were lost in the completion rounds (in round 5, at threshold 429 "
            "against the last main round's 50): the first runs at --completion-weight 0.2"
            ) in capsys.readouterr().out
