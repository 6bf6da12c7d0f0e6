"""completion_weight and the finishing false-positive target too small for the last completion
round's share of them are refused naming the setting given and the least that works. Before,
they were refused in the words of settings nobody gave (round_budget, --round-fp-ratio) or
with a tuple of 36 weights."""

from __future__ import annotations

import math

import pytest

from fedhh.cli.main import main
from fedhh.config import Mode, RunConfig
from fedhh.errors import ConfigError


@pytest.mark.parametrize("weight", [5e-324, 1e-300, 5e-16])
def test_a_completion_weight_no_eps_local_can_pay_for(weight: float) -> None:
    """The last of 32 rounds weighs w/128: below e^-40 of a main round no eps_local (at most
    40) gives it a positive epsilon."""
    least = 128 * math.exp(-40)
    with pytest.raises(ConfigError, match=rf"^completion_weight {weight!r} is too small: the "
                                          r"last of the 32 completion rounds takes 1/128 of "
                                          r"it, which weighs .*; give more than 5.44e-16, or "
                                          r"fewer completion rounds$"):
        RunConfig(completion_weight=weight).validate()
    RunConfig(completion_weight=least * 1.001).validate()
    RunConfig(completion_weight=weight, completion_rounds=0).validate()


@pytest.mark.parametrize("name", ["fp_ratio_finished", "fp_ratio"])
def test_a_finishing_target_whose_last_share_rounds_to_zero(name: str) -> None:
    """The i-th completion round's target is gamma / (i (i + 1)): 1/1,056 of it in the 32nd."""
    given = {name: 5e-324, **({"fp_ratio_finished": None} if name == "fp_ratio" else {})}
    with pytest.raises(ConfigError, match=rf"^{name} 5e-324 is too small: the last of the 32 "
                                          r"completion rounds takes 1/1,056 of it, which "
                                          r"rounds to 0; give more than 2.35e-305"):
        RunConfig(**given).validate()
    RunConfig(**{**given, name: 2.35e-305}).validate()


def test_the_network_refuses_it_by_the_same_words() -> None:
    with pytest.raises(ConfigError, match=r"^completion_weight 1e-300 is too small"):
        RunConfig(completion_weight=1e-300, target_devices=1000,
                  min_devices=900).validate(Mode.NETWORK)


def test_the_command_line_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as end:
        main(["simulate", "--fp-ratio-finished", "5e-324"])
    assert end.value.code == 2
    assert capsys.readouterr().err.startswith(
        "fedhh simulate: error: argument --fp-ratio-finished: fp_ratio_finished 5e-324 is "
        "too small")
