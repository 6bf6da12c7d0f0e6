"""What splits a budget into per-round shares splits it so that the shares add back to at most the
whole, exactly (basic composition, Theorem 3.16), and the bounds that add are rounded up: the
plans are the ones the exact checks accept (docs/privacy.md, "Budgets are compared exactly")."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.privacy import solver
from fedhh.privacy.accountant import aggregate_epsilon
from fedhh.privacy.baselines import triehh_rate, triehhpp_rate
from fedhh.privacy.central import (
    analytic_gaussian_multiplier,
    gaussian_calibration,
    laplace_calibration,
)
from fedhh.privacy.composition import kov_epsilon, kov_inverse, share_down
from fedhh.privacy.ledger import PrivacyLedger

# Decimal budgets (what people type: 1.0, 0.3, 2.7), and any positive double
typed = st.integers(1, 10**4).map(lambda k: k / 10)
totals = st.one_of(typed, st.floats(1e-300, 1e300, allow_nan=False, allow_infinity=False))
parts = st.integers(1, 10**6)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(total=totals, count=parts)
def test_a_share_is_the_largest_double_whose_sum_fits(total: float, count: int) -> None:
    share = share_down(total, count)
    assert Fraction(share) * count <= Fraction(total)
    assert Fraction(math.nextafter(share, math.inf)) * count > Fraction(total)


def test_ten_shares_of_one_are_below_a_tenth() -> None:
    # 1.0 / 10 is 0.1000000000000000055, ten of which are above 1.0
    assert share_down(1.0, 10) == math.nextafter(0.1, 0.0)
    assert share_down(0.5, 4) == 0.125  # a dyadic share is the quotient


@settings(max_examples=300, deadline=None, derandomize=True)
@given(total=typed, count=st.integers(1, 1000))
def test_basic_composition_splits_fit_exactly(total: float, count: int) -> None:
    # (before, kov_inverse compared k * eps rounded to nearest with the total, and gave 10
    # shares of 0.1 for 1.0; TrieHH's eps_agg / T did too)
    share = kov_inverse(total, count, 0.0)
    assert Fraction(share) * count <= Fraction(total)
    assert Fraction(kov_epsilon(share, count, 0.0)) >= Fraction(share) * count
    if total / count <= 3:  # (TrieHH needs theta >= e^(eps/T) - 1: here 20)
        triehh = triehh_rate(20, 10**6, count, total, 1e-3)
        assert Fraction(triehh.per_round_epsilon) * count <= Fraction(total)


def test_triehhpp_shares_fit_eps_and_delta_exactly() -> None:
    # (before, 1e-3 / 10 was 0.00010000000000000000479, and ten of them above 1e-3)
    rate = triehhpp_rate(10, 10, 1.0, 1e-3)  # basic composition wins: all of delta is split
    assert rate.per_round_delta < 1e-3 / 10
    assert Fraction(rate.per_round_epsilon) * 10 <= 1
    assert Fraction(rate.per_round_delta) * 10 <= Fraction(1e-3)


def test_the_central_laplace_scale_of_a_share_fits_exactly() -> None:
    # (before, 1 / 0.19999999999999998 rounded to 5.0: three rounds of Laplace(5) are
    # 3 / 5 = 0.6-DP, above the double 0.6, 0.59999999999999997780)
    scale = laplace_calibration(0.6, 1e-6, 3, 1.0).advanced_noise_scale
    assert 3 / Fraction(scale) <= Fraction(0.6)


def test_the_ledger_rounds_its_basic_composition_up() -> None:
    # 3 x 3.3 is 9.899999999999999 in floats, below the exact 9.8999999999999994671: the
    # projection and the spend were below the bound they stand for
    ledger = PrivacyLedger.open(100.0, 1e-6, 3, 10, eps_local=3.3, method="closed-form")
    exact = 3 * Fraction(3.3)
    assert Fraction(ledger.projected_epsilon()) >= exact
    spent = ledger.record(0, 10).record(1, 10).record(2, 10).spent_epsilon()
    assert Fraction(spent) >= exact


def test_the_solver_takes_only_plans_within_the_target_exactly(monkeypatch) -> None:
    """An accountant whose aggregate is one unit in the last place above the target over a
    span of eps_local: its log equals the target's, and the solver took the span as feasible,
    a plan the ledger's exact comparison refuses."""
    real = aggregate_epsilon(1.0, 1e-6, 2, 1000, method="closed-form")
    above = math.nextafter(10.0, math.inf)
    assert math.log(above) == math.log(10.0)

    def stepped(eps_local: float, *args: object, **kwargs: object) -> object:
        value = 2 * eps_local if eps_local < 5.0 else above if eps_local < 7.0 else 3 * eps_local
        return replace(real, eps_agg=value)

    monkeypatch.setattr(solver, "aggregate_epsilon", stepped)
    found = solver.solve_local_epsilon(10.0, 1e-6, 2, 1000, method="closed-form")
    assert found.eps_agg_achieved <= 10.0
    assert 5.0 - 2 * solver.TOLERANCE < found.eps_local < 5.0


@settings(max_examples=100, deadline=None, derandomize=True)
@given(target=st.one_of(typed.filter(lambda t: t <= 50), st.floats(0.05, 50)),
       rounds=st.integers(1, 64), n_min=st.sampled_from([10, 100, 1000, 100_000]),
       delta=st.sampled_from([1e-3, 1e-6, 1e-9]))
def test_every_solved_plan_is_one_the_ledger_accepts(target: float, rounds: int, n_min: int,
                                                    delta: float) -> None:
    ledger = PrivacyLedger.open(target, delta, rounds, n_min, method="closed-form")
    assert ledger.projected_epsilon() <= target
    fixed = PrivacyLedger.open(target, delta, rounds, n_min, method="closed-form",
                               eps_local=share_down(target, rounds))
    assert fixed.projected_epsilon() <= target


def test_the_central_laplace_scale_times_a_sensitivity_is_rounded_up() -> None:
    # At eps_agg = 700.5 and one round the KOV route (b = sensitivity / eps_agg) is the
    # tightest; before, b was 1 / 700.5 rounded up, then times the sensitivity rounded to
    # nearest: 0.0018558172733761599 for 1.3, below 1.3 / 700.5 exactly
    for sensitivity in (1.3, 2.9, 0.3):
        cal = laplace_calibration(700.5, 1e-6, 1, sensitivity)
        assert cal.tightest == "advanced-composition"
        assert Fraction(cal.noise_scale) * Fraction(700.5) >= Fraction(sensitivity)
        below = math.nextafter(cal.noise_scale, 0.0)
        assert Fraction(below) * Fraction(700.5) < Fraction(sensitivity)  # the smallest


def test_the_central_gaussian_sigma_over_rounds_is_rounded_up() -> None:
    # sqrt(3) x sigma_aGM(1, 1e-6) rounded to nearest was 7.317358487720216, below the exact
    # product: three rounds at it compose to less noise than one round of sigma_aGM
    one_round = analytic_gaussian_multiplier(1.0, 1e-6)
    for rounds, sensitivity in ((3, 1.0), (3, 1.3), (6, 2.0)):
        sigma = gaussian_calibration(1.0, 1e-6, rounds, sensitivity).noise_scale
        exact_squared = rounds * (Fraction(one_round) * Fraction(sensitivity)) ** 2
        assert Fraction(sigma) ** 2 >= exact_squared
        assert Fraction(math.nextafter(sigma, 0.0)) ** 2 < exact_squared


def test_the_central_gaussian_sigma_is_the_smallest_double_at_or_above_the_exact() -> None:
    # 600 derandomized (eps, rounds, sensitivity): the float product sqrt(T) x sigma_aGM x
    # sensitivity can round above the exact value by an ulp, and was kept there (10 of these)
    rng = random.Random(5)
    one_round = {eps: analytic_gaussian_multiplier(eps, 1e-6) for eps in (0.5, 1.0, 4.0)}
    above = []
    for _ in range(600):
        eps, rounds = rng.choice(sorted(one_round)), rng.randint(1, 64)
        sensitivity = rng.choice([1.0, 1.3, 2.0, 0.7, rng.uniform(0.1, 10)])
        sigma = gaussian_calibration(eps, 1e-6, rounds, sensitivity).noise_scale
        exact_squared = rounds * (Fraction(one_round[eps]) * Fraction(sensitivity)) ** 2
        assert Fraction(sigma) ** 2 >= exact_squared
        if Fraction(math.nextafter(sigma, 0.0)) ** 2 >= exact_squared:
            above.append((eps, rounds, sensitivity))
    assert not above
