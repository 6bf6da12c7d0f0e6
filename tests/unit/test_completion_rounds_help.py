"""`--completion-rounds`' help names every setting that rules completion rounds out
(RunConfig.completion_blocker): before, it named two of the seven, and `fedhh simulate
--two-runs` dropped them without the help saying it would."""

from __future__ import annotations

import dataclasses

import pytest

from fedhh.config import RunConfig

BLOCKING = {"algorithm": "triehh", "randomizer": "pi-rappor", "privacy_method": "rdp",
            "round_items": "2", "two_runs": True, "leftover_rounds": "passes",
            "segment_bits": 4}


@pytest.mark.parametrize("name", sorted(BLOCKING))
def test_the_help_names_each_setting_that_rules_completion_rounds_out(name: str) -> None:
    config = dataclasses.replace(RunConfig(), **{name: BLOCKING[name]})
    why = config.completion_blocker()
    assert why is not None and config.completion() == 0
    flag = why.split()[0]
    help_text = {f.name: f.metadata["help"] for f in dataclasses.fields(RunConfig)}
    assert flag in help_text["completion_rounds"], (flag, why)
