"""The two-distribution reduction: published example, brute force, monotonicity, truncation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom

from fedhh.privacy import clones
from fedhh.privacy.clones import (
    FMT21,
    FMT23,
    CloneReduction,
    clone_log_probabilities,
    reduction,
)
from fedhh.privacy.shuffle import closed_form_epsilon

ORDERS = np.array([1.5, 2.0, 3.0, 8.0, 20.0])


def paper_clone_probability(eps0: float, variant: str) -> float:
    """p as the papers write it: e^-eps0 (FMT21 Section 3), 2/(e^eps0 + 1) (FMT23 Lemma 3.5)."""
    return math.exp(-eps0) if variant == FMT21 else 2 / (math.exp(eps0) + 1)


def brute_force_pq(eps0: float, n: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """P and Q over (x, y) pairs by enumerating C, A and Delta (independent implementation)."""
    w = math.exp(eps0) / (math.exp(eps0) + 1)
    size = n + 1
    pm, qm = np.zeros((size, size)), np.zeros((size, size))
    for c in range(n):
        pc = binom.pmf(c, n - 1, p)
        for a in range(c + 1):
            pa = binom.pmf(a, c, 0.5)
            for d, pd in ((1, w), (0, 1 - w)):
                pm[a + d, c - a + 1 - d] += pc * pa * pd
                qm[a + 1 - d, c - a + d] += pc * pa * pd
    return pm.ravel(), qm.ravel()


@pytest.mark.parametrize(
    ("eps0", "n", "variant"), [(1.0, 6, FMT21), (2.5, 9, FMT23), (0.3, 4, FMT21)]
)
def test_matches_brute_force(eps0: float, n: int, variant: str) -> None:
    pm, qm = brute_force_pq(eps0, n, paper_clone_probability(eps0, variant))
    keep = qm > 0
    red = CloneReduction(eps0, n, variant)
    for a in ORDERS:
        exact = math.log(np.sum(pm[keep] ** a * qm[keep] ** (1 - a))) / (a - 1)
        assert red.rdp(np.array([a]))[0] == pytest.approx(exact, rel=1e-9, abs=1e-12)
    for eps in (0.0, 0.2, 0.7):
        exact_delta = float(np.sum(np.maximum(pm - math.exp(eps) * qm, 0.0)))
        assert red.delta(eps) == pytest.approx(exact_delta, rel=1e-9, abs=1e-14)


def test_published_example_hiding_among_the_clones() -> None:
    # apple/ml-shuffling-amplification example.py: n = 1e5, eps0 = 4, delta = 1e-6 gives a
    # numerical amplified epsilon between 0.1675 and 0.1728 and a closed form of at most 0.538.
    red = CloneReduction(4.0, 100_000, FMT21)
    eps = red.epsilon(1e-6)
    assert 0.1675 <= eps <= 0.1728
    assert red.delta(eps) <= 1e-6
    closed = closed_form_epsilon(4.0, 100_000, 1e-6)
    assert eps <= closed <= 0.538


def test_monotone_in_eps0_and_n() -> None:
    a = np.array([2.0, 10.0, 40.0])
    by_eps = [CloneReduction(e, 50_000, FMT21).rdp(a) for e in (2.0, 3.0, 4.0, 5.0)]
    assert all(np.all(x <= y) for x, y in itertools.pairwise(by_eps))
    by_n = [CloneReduction(4.0, n, FMT21).rdp(a) for n in (5_000, 20_000, 80_000)]
    assert all(np.all(x >= y) for x, y in itertools.pairwise(by_n))
    red = CloneReduction(4.0, 20_000, FMT21)
    deltas = [red.delta(e) for e in (0.05, 0.1, 0.2, 0.4)]
    assert deltas == sorted(deltas, reverse=True)


def test_rdp_monotone_in_order() -> None:
    red = CloneReduction(6.0, 300_000, FMT21)
    values = red.rdp(np.array([1.5, 2.0, 4.0, 16.0, 64.0, 256.0]))
    assert np.all(np.diff(values) >= -1e-12)


def test_finer_bins_never_lower_the_bound_much(monkeypatch: pytest.MonkeyPatch) -> None:
    a = np.array([2.0, 16.0, 32.0])
    coarse = CloneReduction(5.0, 400_000, FMT21, 64.0)
    base_rdp, base_eps = coarse.rdp(a), coarse.epsilon(1e-7)
    monkeypatch.setattr(clones, "BIN_NEAR", clones.BIN_NEAR / 2)
    monkeypatch.setattr(clones, "BIN_FAR", clones.BIN_FAR / 2)
    monkeypatch.setattr(clones, "TAIL_MARGIN", 2 * clones.TAIL_MARGIN)
    fine = CloneReduction(5.0, 400_000, FMT21, 128.0)
    # a finer grid and wider windows give a smaller (tighter) or equal bound, within 1%
    assert np.all(fine.rdp(a) <= base_rdp * (1 + 1e-9))
    assert np.all(fine.rdp(a) >= base_rdp * 0.99)
    assert base_eps * 0.99 <= fine.epsilon(1e-7) <= base_eps + 1e-9


def test_stronger_clones_give_smaller_divergence() -> None:
    a = np.array([2.0, 10.0])
    assert np.all(
        CloneReduction(5.0, 100_000, FMT23).rdp(a) < CloneReduction(5.0, 100_000, FMT21).rdp(a)
    )


def test_truncated_mass_is_charged_not_dropped() -> None:
    # large n and small eps0: windows in both c and k are active; the bound stays above the
    # Gaussian-limit value and tails are finite
    red = CloneReduction(2.0, 5_000_000, FMT21, 64.0)
    assert red._tail_lw.size > 0
    assert red._delta_tail > 0
    assert math.isfinite(float(red.rdp(np.array([32.0]))[0]))


def brute_force_sampled(eps0: float, n: int, m: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """P', Q' over (t, k) given m of n devices participate, by enumerating whether the target
    participates, the clones among the other participants, their sides and Delta."""
    w = math.exp(eps0) / (math.exp(eps0) + 1)
    eta = m / n
    pm, qm = np.zeros((m + 1, m + 1)), np.zeros((m + 1, m + 1))
    for present, p_present in ((1, eta), (0, 1 - eta)):
        others = m - present
        for c in range(others + 1):
            pc = p_present * binom.pmf(c, others, p)
            for a in range(c + 1):
                pa = pc * binom.pmf(a, c, 0.5)
                if not present:
                    pm[c, a] += pa
                    qm[c, a] += pa
                    continue
                for d, pd in ((1, w), (0, 1 - w)):
                    pm[c + 1, a + d] += pa * pd
                    qm[c + 1, a + 1 - d] += pa * pd
    return pm.ravel(), qm.ravel()


@pytest.mark.parametrize(("eps0", "n", "m"), [(1.0, 9, 4), (2.5, 12, 11), (0.5, 6, 2)])
def test_sampled_reduction_matches_brute_force(eps0: float, n: int, m: int) -> None:
    pm, qm = brute_force_sampled(eps0, n, m, paper_clone_probability(eps0, FMT21))
    keep = qm > 0
    red = CloneReduction(eps0, n, FMT21, participants=m)
    for a in ORDERS:
        exact = math.log(np.sum(pm[keep] ** a * qm[keep] ** (1 - a))) / (a - 1)
        assert red.rdp(np.array([a]))[0] == pytest.approx(exact, rel=1e-9, abs=1e-12)
    for eps in (0.0, 0.2, 0.7):
        exact_delta = float(np.sum(np.maximum(pm - math.exp(eps) * qm, 0.0)))
        assert red.delta(eps) == pytest.approx(exact_delta, rel=1e-9, abs=1e-14)


def test_sampling_given_the_count_amplifies() -> None:
    a = np.array([2.0, 8.0, 32.0])
    full = CloneReduction(8.0, 400_000, FMT21).rdp(a)
    half = CloneReduction(8.0, 400_000, FMT21, participants=200_000).rdp(a)
    same = CloneReduction(8.0, 400_000, FMT21, participants=400_000).rdp(a)
    assert np.all(half < full) and np.all(same == full)
    with pytest.raises(ValueError, match="participants must be at most n=10"):
        CloneReduction(1.0, 10, FMT21, participants=11)


def test_windows_are_sized_for_the_declared_order() -> None:
    # small clone means (heavier-than-Gaussian upper tails): a window sized for order 48
    # gives the same divergences below 48 as one sized for order 256 (issue 12 item 3)
    a = np.array([12.0, 20.0, 28.0])
    narrow = CloneReduction(10.65, 1_600_000, FMT21, 48.0, participants=160_000).rdp(a)
    wide = CloneReduction(10.65, 1_600_000, FMT21, 256.0, participants=160_000).rdp(a)
    assert narrow == pytest.approx(wide, rel=1e-6)


def test_far_bins_below_the_mean_are_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 12 item 5: coarse bins below the mean cost up to 1% of eps_local at n = 1e7
    a = np.array([8.0, 16.0, 24.0])
    ours = CloneReduction(10.0, 10_000_000, FMT21, 48.0).rdp(a)
    monkeypatch.setattr(clones, "BIN_NEAR", clones.BIN_NEAR / 5)
    finest = CloneReduction(10.0, 10_000_000, FMT21, 48.0).rdp(a)
    assert np.all(finest <= ours * (1 + 1e-9)) and np.all(ours <= finest * 1.005)


@pytest.mark.parametrize("variant", [FMT21, FMT23])
@pytest.mark.parametrize("eps0", [0.3, 2.5, 12.0])
def test_clone_log_probabilities_are_the_papers(eps0: float, variant: str) -> None:
    log_p, log_q = clone_log_probabilities(eps0, variant)
    p = paper_clone_probability(eps0, variant)
    assert log_p == pytest.approx(math.log(p), rel=1e-14)
    assert log_q == pytest.approx(math.log1p(-p), rel=1e-12)


def test_clone_log_probabilities_stay_exact_when_p_rounds_to_one() -> None:
    # 1 - e^-eps0 = eps0 (1 - eps0/2 + ...) and (e^eps0 - 1)/(e^eps0 + 1) = eps0/2 (1 - ...):
    # at eps0 = 1e-20 the logs are ln(1e-20) = -20 ln 10 and ln(5e-21), where 1 - p is 0 in
    # floating point
    assert paper_clone_probability(1e-20, FMT21) == 1.0
    assert clone_log_probabilities(1e-20, FMT21) == (-1e-20, pytest.approx(-20 * math.log(10)))
    log_p, log_q = clone_log_probabilities(1e-20, FMT23)
    assert log_p == pytest.approx(-5e-21, abs=1e-30) and log_q == pytest.approx(math.log(5e-21))


@pytest.mark.parametrize("variant", [FMT21, FMT23])
@pytest.mark.parametrize("eps0", [1e-20, 1e-300, 5e-324])
@pytest.mark.parametrize("participants", [None, 500])
def test_tiny_eps0_is_answered_within_eps0(eps0: float, variant: str,
                                           participants: int | None) -> None:
    # eps0 below ~1.1e-16 made p = e^-eps0 round to 1 and log(1 - p) fail (math domain error);
    # the shuffled output is eps0-DP in any case (post-processing), so every bound is <= eps0
    red = CloneReduction(eps0, 1000, variant, participants=participants)
    assert 0.0 <= red.epsilon(1e-6) <= eps0
    assert red.delta(0.0) <= 1e-6
    rdp = red.rdp(ORDERS)
    assert np.all((rdp >= 0.0) & (rdp <= eps0))


def test_float_error_of_the_weights_is_charged_at_a_billion_devices() -> None:
    """At n = 10^9 the log-weights' rounding (~1e-5) exceeds the divergences (~1e-9): uncharged,
    the RDP curve came out as exact zeros and the accountant claimed eps_agg = 0."""
    from fedhh.privacy.accountant import aggregate_epsilon
    from fedhh.privacy.clones import weight_error

    red = reduction(2.0, 10**9, FMT21)
    rdp = red.rdp(np.array([1.25, 2.0, 8.0, 64.0]))
    assert np.all(rdp > 0)
    assert red.weight_error >= weight_error(10**9, red.log_p, red.log_q, 1) > 1e-5
    assert aggregate_epsilon(2.0, 1e-6, 4, 10**9, method="clones").eps_agg > 1e-4
    # Small populations: the charge is negligible against the divergences.
    assert reduction(2.0, 1000, FMT21).weight_error < 1e-9
