"""A holder that answers the unmask stage with wrong shares (outside probe, thirty-sixth stop).

Before, one wrong share among the t at the smallest points aborted the round
(``corrupt_share``) after every honest device had revealed its shares: one enrolled device made
each attempt it joined a charged abort. Now the server rebuilds the secret around it from the
spare shares it holds (holders beyond t that answered), checks the result against the owner's
commitment or public key, names the holder that lied and leaves its shares out of the other
secrets. Only when no set of right shares is at hand does the round still abort, never
releasing a wrong sum. Seeded, in memory (``fedhh.secagg.simulate``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "secagg"))
from secagg_testkit import assert_correct, assert_one_secret_each, reports_for, small_cohort

from fedhh.secagg import AbortReason, Stage, UnmaskResponse
from fedhh.secagg.messages import DeviceMessage
from fedhh.secagg.simulate import DropoutPlan, SimulatedRound


def _corrupting(liars: set[int], kind: str):  # a simulate hook
    """A to_server hook: each liar's unmask answer with every share of ``kind`` ("b" or "s")
    changed (its last byte flipped, so it stays below p)."""

    def flip(entries: object) -> tuple[tuple[int, bytes], ...]:
        return tuple((owner, value[:-1] + bytes([value[-1] ^ 1]))
                     for owner, value in entries)  # type: ignore[attr-defined]

    def hook(stage: Stage, u: int, msg: DeviceMessage) -> DeviceMessage | None:
        if isinstance(msg, UnmaskResponse) and u in liars:
            b, s = tuple(msg.b_shares), tuple(msg.s_shares)
            if kind == "b":
                b = flip(b)
            else:
                s = flip(s)
            return UnmaskResponse(msg.session_id, msg.device_id, b, s)
        return msg
    return hook


@pytest.mark.parametrize("liars", [{1}, {1, 2}, {3, 7}])
def test_wrong_b_shares_are_rebuilt_around_and_their_holders_named(liars: set[int]) -> None:
    driver = SimulatedRound(small_cohort(), reports_for(8, 12), to_server=_corrupting(liars, "b"))
    outcome = driver.run()
    assert_correct(outcome)  # the exact sum over all 8, liars' inputs included
    # (a liar is named when its share was among those a rebuild used: 7's never were in [3, 7])
    assert driver.server.corrupt_holders and driver.server.corrupt_holders <= liars


def test_wrong_s_shares_of_a_dropped_device_are_rebuilt_around() -> None:
    driver = SimulatedRound(small_cohort(), reports_for(8, 12),
                            DropoutPlan.at(Stage.MASKED_INPUT, {5}),
                            to_server=_corrupting({2}, "s"))
    outcome = driver.run()
    assert_correct(outcome)
    assert 5 not in outcome.contributors and outcome.revealed[5] == {"s"}
    assert driver.server.corrupt_holders == {2}


def test_without_spare_shares_a_wrong_share_still_aborts_and_releases_nothing() -> None:
    """t = 6 of 7 neighbours, device 8 silent at the unmask stage: device 2's b_u has exactly
    t shares (its holders 1, 3..7), one of them wrong: nothing to rebuild around."""
    driver = SimulatedRound(small_cohort(t=6, n_min=6), reports_for(8, 12),
                            DropoutPlan.at(Stage.UNMASK, {8}), to_server=_corrupting({1}, "b"))
    outcome = driver.run()
    assert outcome.result is None
    assert outcome.abort is not None and outcome.abort.reason is AbortReason.CORRUPT_SHARE
    assert_one_secret_each(outcome)
