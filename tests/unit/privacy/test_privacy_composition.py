"""Composition and conversion: hand-computed constants and agreement with dp_accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from fedhh.privacy.composition import (
    ORDERS,
    cks_epsilons,
    delta_splits,
    kov_epsilon,
    kov_inverse,
    rdp_to_dp,
)


def test_cks_hand_constant() -> None:
    # rdp 0.1 at order 10, delta 1e-6: 0.1 + log(0.9) - (log(1e-6) + log(10)) / 9
    expected = 0.1 + math.log(0.9) + (6 * math.log(10) - math.log(10)) / 9
    got = cks_epsilons(np.array([10.0]), np.array([0.1]), 1e-6)[0]
    assert got == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(1.27385, abs=1e-4)  # -0.10536 + 0.1 + 11.5129 / 9


def test_rdp_to_dp_matches_dp_accounting_and_own_formula() -> None:
    orders = np.asarray(ORDERS)
    rdp = 0.003 * orders  # a Gaussian-like curve
    ours = rdp_to_dp(orders, rdp, 1e-6)
    theirs, order = rdp_privacy_accountant.compute_epsilon(list(orders), list(rdp), 1e-6)
    assert ours.epsilon == pytest.approx(theirs, rel=1e-12)
    assert ours.order == order
    assert ours.epsilon == pytest.approx(float(np.min(cks_epsilons(orders, rdp, 1e-6))), rel=1e-12)


def test_kov_hand_constants() -> None:
    assert kov_epsilon(0.3, 1, 0.0) == pytest.approx(0.3)
    assert kov_epsilon(0.3, 5, 0.0) == pytest.approx(1.5)
    eps, k, slack = 0.1, 100, 1e-6
    head = (math.e**eps - 1) * eps * k / (math.e**eps + 1)
    third = head + eps * math.sqrt(2 * k * math.log(1 / slack))
    second = head + eps * math.sqrt(2 * k * math.log(math.e + math.sqrt(k * eps**2) / slack))
    assert kov_epsilon(eps, k, slack) == pytest.approx(min(k * eps, second, third), rel=1e-12)
    assert kov_epsilon(eps, k, slack) == pytest.approx(5.75611, abs=1e-4)  # 0.49958 + 5.25652


@pytest.mark.parametrize("k", [1, 4, 30, 200])
def test_kov_inverse_round_trip(k: int) -> None:
    eps_r = kov_inverse(1.0, k, 1e-7)
    assert kov_epsilon(eps_r, k, 1e-7) <= 1.0
    assert kov_epsilon(eps_r * (1 + 1e-9), k, 1e-7) == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("rounds", [1, 3, 12])
def test_delta_splits_spend_exactly_delta(rounds: int) -> None:
    for split in delta_splits(1e-6, rounds):
        total = 1 - (1 - split.per_round) ** rounds * (1 - split.slack)
        assert total == pytest.approx(1e-6, rel=1e-9)
        assert split.per_round > 0


def test_basic_composition_is_not_below_the_exact_sum() -> None:
    # ten runs at 0.1: a float sum gave 0.9999999999999999, below the exact sum of the doubles
    from fractions import Fraction

    from fedhh.privacy import basic_composition
    from fedhh.privacy.composition import sum_up

    eps, delta = basic_composition([(0.1, 1e-7)] * 10)
    assert Fraction(eps) >= 10 * Fraction(0.1) and eps == math.nextafter(1.0, 2.0)
    assert Fraction(delta) >= 10 * Fraction(1e-7)
    assert sum_up([0.5, 0.25]) == 0.75 and sum_up([]) == 0.0  # exact sums stay exact
    values = [0.1, 0.2, 0.3, 1e-17, 7.7]
    assert Fraction(sum_up(values)) >= sum(Fraction(v) for v in values)
    assert Fraction(math.nextafter(sum_up(values), 0.0)) < sum(Fraction(v) for v in values)


def test_a_sum_past_the_largest_double_rounds_up_to_inf() -> None:
    """Before, sum_up's float() of the exact sum raised OverflowError: basic_composition of
    two guarantees of eps 1e308 was a traceback (a float sum gave inf, as now)."""
    import sys

    from fedhh.privacy import basic_composition
    from fedhh.privacy.composition import sum_up

    assert basic_composition([(1e308, 0.0), (1e308, 0.0)]) == (math.inf, 0.0)
    big = sys.float_info.max
    assert sum_up([big, big]) == math.inf and sum_up([-big, -big]) == -big
    assert sum_up([big, -big, 1.0]) == 1.0
