"""PI-RAPPOR's round parameters: the appendix's q, exact eps-DP of the implemented rates in
rational arithmetic, the choice of |S| (checked against a search over every |S|), and the
extra error of a non-integer alpha_0 q."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from fedhh.errors import ConfigError
from fedhh.pirappor.field import prime_power
from fedhh.pirappor.params import (
    SCALE,
    PiRapporVariant,
    ideal_null_variance,
    null_variance,
    round_parameters,
)

GRID = [(eps, s) for eps in (0.1, 0.5, 1.0, 2.0, 3.3, 4.0, 6.0, 8.0, 8.4668, 10.0, 14.0, 20.0)
        for s in (1, 2, 3, 4, 8, 10, 12, 15, 20, 23, 30)]


def exp_decimal(eps: float) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return Decimal(eps).exp()


@pytest.mark.parametrize("eps, s", GRID)
def test_q_is_the_smallest_prime_power_above_the_appendix_bound(eps: float, s: int) -> None:
    params = round_parameters(eps, s)
    bound = max(exp_decimal(eps) + 1, Decimal(1 << s))
    assert params.q > bound and prime_power(params.q) is not None
    if params.q < 10**6:
        assert all(prime_power(x) is None for x in range(math.floor(bound) + 1, params.q))


@pytest.mark.parametrize("eps, s", GRID)
@pytest.mark.parametrize("variant", list(PiRapporVariant))
def test_implemented_rates_are_exactly_eps_dp(eps: float, s: int, variant: PiRapporVariant) -> None:
    params = round_parameters(eps, s, variant)
    a, a1 = Fraction(params.set_size, params.q), Fraction(params.threshold1, SCALE)
    e = exp_decimal(eps)
    assert 0 < a < a1 < 1
    with localcontext() as ctx:
        ctx.prec = 60

        def dec(x: Fraction) -> Decimal:
            return Decimal(x.numerator) / Decimal(x.denominator)

        if variant is PiRapporVariant.REPLACEMENT:
            # P[v|x] / P[v|x'] over two inputs is at most alpha_1 (1 - a) / (a (1 - alpha_1)).
            assert dec(a1 * (1 - a) / (a * (1 - a1))) <= e
        else:
            # Against the uniform report: alpha_1 / a and (1 - a) / (1 - alpha_1) within e^eps.
            for ratio in (a1 / a, (1 - a) / (1 - a1), a / a1, (1 - a1) / (1 - a)):
                assert dec(ratio) <= e
    assert params.worst_log_ratio <= eps * (1 + 1e-12)


@pytest.mark.parametrize("eps, s", [(e, s) for e, s in GRID if round_parameters(e, s).q < 5000])
@pytest.mark.parametrize("variant", list(PiRapporVariant))
def test_set_size_is_best_over_every_size(eps: float, s: int, variant: PiRapporVariant) -> None:
    """The chosen |S| (a neighbour of alpha_0 q) has the least variance of all |S| in 1..q-1,
    each with its largest admissible alpha_1: the unimodality argument of the docstring."""
    params = round_parameters(eps, s, variant)
    e, q = math.exp(eps), params.q
    ideal = q / (e + 1)
    assert params.set_size in (math.floor(ideal), math.ceil(ideal))
    best = math.inf
    for m in range(1, q):
        a = m / q
        a1 = (e * a / (1 - a + e * a) if variant is PiRapporVariant.REPLACEMENT
              else min(e * a, 1 - (1 - a) / e))
        if a1 > a:
            best = min(best, null_variance(a, a1))
    assert null_variance(params.a0, params.a1) <= best * (1 + 1e-6)


def test_integer_alpha0_q_gives_the_appendix_constants() -> None:
    # eps = ln(7.5): e^eps + 1 = 8.5, and q = 17 (smallest prime power above 2^4 = 16), so
    # alpha_0 q = 2 exactly (up to float rounding of eps).
    params = round_parameters(math.log(7.5), 4)
    assert (params.q, params.set_size) == (17, 2)
    assert abs(params.a1 - 0.5) < 1e-9
    assert params.variance_inflation == pytest.approx(1.0, abs=1e-8)
    deletion = round_parameters(math.log(7.5), 4, PiRapporVariant.DELETION)
    assert deletion.set_size == 2 and abs(deletion.a1 - 7.5 / 8.5) < 1e-9


def test_non_integer_alpha0_q_rounds_to_the_better_neighbour() -> None:
    # eps = 8, 10-bit segments: q = 2999, alpha_0 q = 1.0054; |S| = 1 with alpha_1 just below
    # 1/2 is nearly exact, where |S| = 2 with alpha_1 = 1/2 would double the variance.
    params = round_parameters(8.0, 10)
    assert (params.q, params.set_size) == (2999, 1)
    assert 0.498 < params.a1 < 0.5
    assert params.variance_inflation < 1.001
    assert null_variance(2 / 2999, 0.5) / ideal_null_variance(8.0) > 1.9


@pytest.mark.parametrize("lowest, bound", [(4.0, 1.031), (1.0, 1.043), (0.1, 1.091)])
def test_variance_inflation_bounds(lowest: float, bound: float) -> None:
    worst = 0.0
    for eps in np.round(np.arange(lowest, 20.0001, 0.05), 3):
        for s in (*range(1, 13), 16, 20, 23, 30):
            for variant in PiRapporVariant:
                worst = max(worst, round_parameters(float(eps), s, variant).variance_inflation)
    assert 1.0 < worst <= bound


def test_deletion_variant_costs_about_twice_eps_under_replacement() -> None:
    params = round_parameters(4.0, 12, PiRapporVariant.DELETION)
    assert params.worst_log_ratio <= 4.0
    assert params.replacement_epsilon == pytest.approx(8.0, rel=1e-3)
    assert round_parameters(4.0, 12).replacement_epsilon <= 4.0


@pytest.mark.parametrize("eps, s", [(0.0, 3), (-1.0, 3), (float("nan"), 3), (float("inf"), 3),
                                    (1.0, 0), (1.0, 31), (22.0, 3)])
def test_bad_parameters_are_refused(eps: float, s: int) -> None:
    with pytest.raises(ConfigError):
        round_parameters(eps, s)
