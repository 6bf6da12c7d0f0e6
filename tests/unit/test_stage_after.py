"""``Round.stage_after``: the stage whose request a device gets after its submission, asked for
every device's every message at a worker (a table lookup, not the enum's constructor)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from call_count_kit import calls

from fedhh.secagg import ProtocolViolation, Stage
from fedhh_aggregator.rounds import Round

AFTER = {(Stage.ADVERTISE_KEYS, True): Stage.SHARE_KEYS,
         (Stage.SHARE_KEYS, True): Stage.MASKED_INPUT,
         (Stage.MASKED_INPUT, True): Stage.CONSISTENCY_CHECK,
         (Stage.MASKED_INPUT, False): Stage.UNMASK,
         (Stage.CONSISTENCY_CHECK, True): Stage.UNMASK}


def _round(consistency_check: bool) -> Round:
    # (stage_after reads the round's config alone)
    return SimpleNamespace(config=SimpleNamespace(  # type: ignore[return-value]
        consistency_check=consistency_check))


@pytest.mark.parametrize(("stage", "check"), sorted(AFTER))
def test_the_stage_after_a_submission(stage: Stage, check: bool) -> None:
    round_ = _round(check)
    after = Round.stage_after(round_, stage)
    assert after is AFTER[stage, check]
    # Before, Stage(stage + 1): 4 calls here (the enum's __call__ and __new__).
    assert calls(lambda: Round.stage_after(round_, stage)) <= 3


@pytest.mark.parametrize("stage", [Stage.UNMASK, Stage.DONE])
def test_no_request_follows_the_last_stages(stage: Stage) -> None:
    with pytest.raises(ProtocolViolation, match=f"no request follows {stage.name}"):
        Round.stage_after(_round(True), stage)
