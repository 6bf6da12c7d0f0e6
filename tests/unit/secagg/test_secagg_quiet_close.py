"""``SecAggServer.closing_keeps_round``: the aggregator closes a stage before its deadline only if
the close keeps the round alive. With lying-server (k, t) the devices short of t share holders
are pruned, and the pruning cascades: a few devices more or fewer decide between a whole round
and none (docs/benchmarks.md, the pruning cliff), so the predicate must agree exactly with what
the close does."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.secagg.messages import Stage
from fedhh.secagg.simulate import DropoutPlan, SimulatedRound, make_cohort

N, DIM, K, T, N_MIN = 24, 16, 12, 8, 6
COHORT = make_cohort(N, DIM, K, T, n_min=N_MIN, seed=7, round_id=b"quiet/cliff")
REPORTS = {u: np.array([u % DIM], dtype=np.int64) for u in range(1, N + 1)}


def _driver_at(stage: Stage, silent: frozenset[int]) -> SimulatedRound:
    """A round whose devices all answered every stage before ``stage`` and, at ``stage``, all
    but ``silent``; the stage is still open."""
    driver = SimulatedRound(COHORT, REPORTS, DropoutPlan.at(stage, silent))
    while driver.server.stage != stage:
        driver.step()
        assert not driver.finished, driver.outcome.abort
    driver.answer()
    return driver


@pytest.mark.parametrize("stage", [Stage.SHARE_KEYS, Stage.MASKED_INPUT])
def test_the_prediction_is_what_the_close_does(stage: Stage) -> None:
    rng = np.random.default_rng(11)
    seen = set()
    for missing in range(0, N - N_MIN + 1):
        for _ in range(3):
            silent = frozenset(int(u) for u in rng.choice(np.arange(1, N + 1), missing,
                                                          replace=False))
            driver = _driver_at(stage, silent)
            keeps = driver.server.closing_keeps_round()
            driver.close()
            assert keeps == (driver.outcome.abort is None), (stage, sorted(silent))
            seen.add(keeps)
    assert seen == {True, False}  # the sweep crossed the cliff


def test_advertisement_that_would_be_pruned_away_is_not_closed() -> None:
    """After the advertisement the prediction looks one stage ahead: if the devices that
    advertised cannot keep n_min of them with t share holders even when all of them share,
    the key sharing would abort, so an early close gains nothing."""
    rng = np.random.default_rng(5)
    seen = set()
    for missing in range(0, N - N_MIN + 1):
        silent = frozenset(int(u) for u in rng.choice(np.arange(1, N + 1), missing,
                                                      replace=False))
        driver = _driver_at(Stage.ADVERTISE_KEYS, silent)
        keeps = driver.server.closing_keeps_round()
        driver.close()
        driver.step()  # every device asked to share its keys does
        assert keeps == (driver.outcome.abort is None), sorted(silent)
        seen.add(keeps)
    assert seen == {True, False}


def test_nothing_keeps_an_aborted_round() -> None:
    driver = _driver_at(Stage.SHARE_KEYS, frozenset())
    driver.server.abort()
    assert not driver.server.closing_keeps_round()
