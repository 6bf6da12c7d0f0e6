"""Shared helpers of the secagg tests (not a test module)."""

from __future__ import annotations

import dataclasses

import numpy as np

from fedhh.secagg.device import SHARE_CIPHERTEXT_BYTES
from fedhh.secagg.messages import ShareBundle, ShareKeysResponse, Stage
from fedhh.secagg.simulate import Cohort, DropoutPlan, SimulatedOutcome, SimulatedRound, make_cohort


def reports_for(n: int, dimension: int, seed: int = 0, density: float = 0.3) -> dict[int,
                                                                                     np.ndarray]:
    """Random 0/1 reports as sorted index arrays, one per device 1..n (seeded)."""
    rng = np.random.default_rng(seed)
    return {u: np.flatnonzero(rng.random(dimension) < density) for u in range(1, n + 1)}


def small_cohort(**kw: object) -> Cohort:
    """n = 8, complete graph (k = 7), t = 4, D = 12 unless overridden."""
    args: dict[str, object] = dict(n=8, dimension=12, k=7, t=4, n_min=4, seed=11)
    args.update(kw)
    return make_cohort(**args)  # type: ignore[arg-type]


def drive_to(cohort: Cohort, stage: Stage, dropouts: DropoutPlan | None = None,
             **kw: object) -> SimulatedRound:
    """A driver whose server has just opened ``stage`` (requests in ``driver.pending``)."""
    n = cohort.config.num_devices
    driver = SimulatedRound(cohort, reports_for(n, cohort.config.dimension), dropouts,
                         **kw)  # type: ignore[arg-type]
    while driver.server.stage < stage and not driver.finished:
        driver.step()
    assert driver.server.stage == stage, driver.outcome.abort
    return driver


def assert_correct(outcome: SimulatedOutcome) -> None:
    """The round released the exact plaintext sum over the accepted masked inputs."""
    assert outcome.abort is None, outcome.abort
    assert outcome.result is not None
    assert np.array_equal(outcome.result.total.astype(np.int64), outcome.expected_total)
    assert outcome.result.num_contributors == len(outcome.contributors)
    assert_one_secret_each(outcome)


def assert_one_secret_each(outcome: SimulatedOutcome) -> None:
    """No device had both kinds of its secrets' shares revealed by honest devices."""
    assert all(len(kinds) == 1 for kinds in outcome.revealed.values()), outcome.revealed


def packed_shares(response: ShareKeysResponse) -> ShareKeysResponse:
    """``response`` with its shares as the ShareBundle a worker takes off the session stream."""
    shares = response.shares
    return dataclasses.replace(response, shares=ShareBundle.sent_by(
        response.device_id, tuple(s.dst for s in shares),
        b"".join(s.ciphertext for s in shares), SHARE_CIPHERTEXT_BYTES))
