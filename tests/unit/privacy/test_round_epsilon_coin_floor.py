"""A round of an allocation runs at eps_local + ln(its weight), which an explicit eps_local
(or the coordinator's max_eps_local) can leave positive but below what a device's coins resolve
(2^-32: ~9.31e-10, ``fedhh.device.randomizer.a0_threshold``). Such a round is not budgeted, as
one at 0 is not (``accountant.check_offsets``). Before, it was: a completion round at 7.8e-11
(eps_local 1, completion weight 0.3678794412) ended `fedhh simulate` in a ZeroDivisionError,
its estimator's scale 1 / (a1 - a0) over reports that carry nothing."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fedhh.config import RunConfig, with_most_completions
from fedhh.errors import PrivacyError
from fedhh.privacy.accountant import allocation_offsets, check_offsets
from fedhh.privacy.ledger import PrivacyLedger

WEIGHT = 0.3678794412  # (ln of it: -1 + 7.76e-11)


def test_a_round_below_the_coins_floor_is_refused_by_name() -> None:
    with pytest.raises(PrivacyError, match=r"eps_local of round 2 is 7\.76\d*e-11, below what "
                                           r"a device's coins resolve"):
        check_offsets(1.0, [0.0, math.log(WEIGHT)], 2, "sum")


def test_a_round_just_above_the_floor_is_budgeted() -> None:
    assert check_offsets(1.0, [0.0, -1.0 + 1e-9], 2, "sum")[1] == pytest.approx(1e-9)


def test_a_completion_round_below_the_floor_is_dropped() -> None:
    config = replace(RunConfig(), eps_local=1.0, rounds=4, completion_rounds=4,
                     completion_weight=WEIGHT)

    def plan(run: RunConfig) -> PrivacyLedger:  # (as the simulator and coordinator plan)
        weights = run.round_weights()
        if weights is None:
            return PrivacyLedger.open(1.0, 1e-6, run.rounds, 3000, eps_local=run.eps_local)
        return PrivacyLedger.open_allocated(1.0, 1e-6, allocation_offsets(weights), 3000,
                                            eps_local=run.eps_local)

    run, ledger = with_most_completions(config, plan, lambda ledger: ledger.eps_local)
    assert run.completion() == 0 and ledger.eps_local == 1.0
