"""PruneHH: the threshold rises until the expected false-positive ratio is at most gamma."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scipy import stats

from fedhh.config import RunConfig
from fedhh.errors import ConfigError
from fedhh.server import prune_hh
from fedhh.server.estimate import GaussianTail
from fedhh.server.prune import ETA_MAX, MAX_ITERATIONS


def planted(domain: int, signal: dict[int, float], seed: int = 0) -> np.ndarray:
    est = np.random.default_rng(seed).normal(0.0, 1.0, size=domain)
    for index, value in signal.items():
        est[index] += value
    return est


@pytest.mark.parametrize("gamma", [0.1, 0.5, 1.0, 2.0])
def test_stops_at_the_first_admissible_threshold(gamma: float) -> None:
    est = planted(100_000, {i: 8.0 for i in range(50)})
    tail = GaussianTail(1.0)
    result = prune_hh(est, tail, gamma, tau0=1.0, eta=0.5)
    kept = result.kept.size
    assert kept == np.count_nonzero(est > result.threshold)
    assert result.expected_false_positives <= gamma * kept
    # One step earlier (E / eta) the ratio was still too high.
    e_prev = result.false_positive_probability / 0.5
    x_prev = stats.norm.isf(e_prev)
    if result.iterations:
        assert e_prev * est.size > gamma * np.count_nonzero(est > x_prev)
    # The paper's loop: E = (1 - Phi(tau0)) * eta^k.
    expected_e = stats.norm.sf(1.0) * 0.5**result.iterations
    assert result.false_positive_probability == pytest.approx(expected_e, rel=1e-9)
    assert set(range(50)) <= set(result.kept.tolist())


def test_pure_noise_keeps_nothing() -> None:
    est = np.random.default_rng(3).normal(size=200_000)
    result = prune_hh(est, GaussianTail(1.0), 0.5)
    assert result.kept.size == 0


def test_large_gamma_keeps_at_tau0() -> None:
    est = planted(1000, {1: 10.0})
    result = prune_hh(est, GaussianTail(1.0), 1e9, tau0=2.0)
    assert result.iterations == 0 and result.tau == pytest.approx(2.0)


@pytest.mark.parametrize("kwargs", [{"fp_ratio": 0}, {"fp_ratio": 1, "eta": 1.0},
                                    {"fp_ratio": 1, "eta": 0.0}, {"fp_ratio": 1, "tau0": -1}])
def test_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        prune_hh(np.zeros(10), GaussianTail(1.0), **kwargs)


def test_fp_ratio_relative_to_discoveries() -> None:
    from fedhh.errors import ConfigError as Error
    from fedhh.server import TreeConfig

    assert TreeConfig(rounds=4, fp_ratio=2.0, fp_ratio_of="discoveries").kept_fp_ratio == \
        pytest.approx(2 / 3)
    assert TreeConfig(rounds=4, fp_ratio=0.4).kept_fp_ratio == 0.4
    with pytest.raises(Error, match="never raises the threshold"):
        TreeConfig(rounds=4, fp_ratio=1.0).validate(60)
    TreeConfig(rounds=4, fp_ratio=1.0, fp_ratio_of="discoveries").validate(60)
    with pytest.raises(Error, match="fp_ratio_of"):
        TreeConfig(rounds=4, fp_ratio_of="everything").validate(60)


def test_an_eta_too_close_to_one_is_refused_before_any_round() -> None:
    """Before, eta 0.9999999999999999 was taken, and the first round's PruneHH stopped the run
    with RuntimeError "PruneHH did not converge" after 10,000 steps."""
    with pytest.raises(ConfigError, match=r"^eta must be in \(0, 0.99\] .*got 0.9999999999999999$"):
        prune_hh(planted(1_000, {0: 8.0}), GaussianTail(1.0), 0.5, eta=0.9999999999999999)
    with pytest.raises(ConfigError, match=r"^eta must be in \(0, 0.99\]"):
        RunConfig(eta=0.9999999999999999).validate()
    with pytest.raises(ConfigError, match=r"^fp_ratio \(gamma\) must be at least 2.225e-308"):
        RunConfig(fp_ratio=1e-310, fp_ratio_finished=None, completion_rounds=0).validate()


def test_the_loop_ends_at_its_bounds() -> None:
    """The slowest descent allowed: E from 1 by steps of eta 0.99 (rounded as the loop rounds
    them) below the smallest gamma over a 2^30-element domain, into the subnormal floats,
    within MAX_ITERATIONS (the loop's arithmetic alone: each step of prune_hh runs the tail's
    inverse, 12 s for the whole descent)."""
    e, steps, size = 1.0, 0, 1 << 30
    while sys.float_info.min * 1 < e * size:
        e *= ETA_MAX
        steps += 1
        assert steps < MAX_ITERATIONS
    assert steps > 70_000  # (a bound that is not loose by an order)
    result = prune_hh(np.array([1e300]), GaussianTail(1.0), 1e-3, eta=ETA_MAX)
    assert result.kept.tolist() == [0] and result.iterations > 0
