"""The aggregate-sum accountant against independent computations.

* brute force: every coin of every device at the two changed coordinates enumerated, every
  data of the other devices, both neighbour kinds; exact hockey-stick divergences;
* dp-accounting's own path: the f = 0 pair through ``from_two_probability_mass_functions``
  with optimistic and pessimistic rounding at a fine discretization (brackets the truth);
* the issue's figures; binomial windows against exact rational arithmetic.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, getcontext
from typing import Any

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from fedhh.device import RandomizedResponse
from fedhh.privacy import dots, sum_pld

EPS_GRID = np.linspace(0.0, 3.0, 31)


def outcome_law(holders: tuple[str, ...], eps_local: float, weight: float = 1.0
                ) -> dict[tuple[int, int], float]:
    """Law of (sum at v, sum at w) over these devices, every coin outcome enumerated.

    ``holders`` are the devices' elements: "v", "w" or "x" (elsewhere, or nothing).
    """
    rate = sum_pld.rates(eps_local)
    k = len(holders)
    coins = np.array(list(itertools.product((0, 1), repeat=2 * k)), dtype=np.int64)
    ones = np.array([[rate.a1 if h == c else rate.a0 for c in "vw"] for h in holders]).ravel()
    prob = weight * np.prod(np.where(coins == 1, ones, 1.0 - ones), axis=1)
    sv, sw = coins[:, 0::2].sum(axis=1), coins[:, 1::2].sum(axis=1)
    table = np.zeros((k + 1, k + 1))
    np.add.at(table, (sv, sw), prob)
    return {(i, j): float(table[i, j]) for i in range(k + 1) for j in range(k + 1)
            if table[i, j] > 0}


def brute_force(n: int, target: str, other: str, data: tuple[str, ...], eps_local: float,
                ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """Laws of the two changed coordinates' sums when device 0 holds ``target`` vs ``other``;
    ``data`` are the elements of devices 1..n-1."""
    return (outcome_law((target, *data), eps_local), outcome_law((other, *data), eps_local))


def hockey(p: dict, q: dict, eps: float) -> float:
    return sum(max(p[k] - math.exp(eps) * q.get(k, 0.0), 0.0) for k in p)


@pytest.mark.parametrize(("n", "eps_local"), [(2, 1.0), (3, 2.0), (4, 0.7), (5, 3.0)])
def test_round_dominates_every_data_by_brute_force(n: int, eps_local: float) -> None:
    bound = sum_pld.round_pld(eps_local, n).get_delta_for_epsilon(EPS_GRID)
    worst = np.zeros_like(EPS_GRID)
    for data in itertools.combinations_with_replacement("vwx", n - 1):
        for target, other in (("v", "w"), ("w", "v"), ("v", "x"), ("x", "v")):
            p, q = brute_force(n, target, other, data, eps_local)
            exact = np.array([hockey(p, q, e) for e in EPS_GRID])
            assert np.all(exact <= bound + 1e-12), (data, target, other)
            worst = np.maximum(worst, exact)
    # Not vacuous: the bound is close to the worst data where it matters.
    mid = (worst > 1e-4)
    assert np.all(bound[mid] <= worst[mid] * 1.5 + 1e-3)


def test_f0_is_not_the_worst_case_for_every_epsilon() -> None:
    # n = 2: the other device holding v gives the larger delta near eps_local - ln 2.
    eps_local, eps = 3.0, 2.2
    p0, q0 = brute_force(2, "v", "x", ("x",), eps_local)
    p1, q1 = brute_force(2, "v", "x", ("v",), eps_local)
    assert hockey(p1, q1, eps) > hockey(p0, q0, eps) > 0


def test_two_rounds_dominate_brute_force_products() -> None:
    n, eps_local = 3, 1.5
    bound = sum_pld.composed_pld(eps_local, [n, n]).get_delta_for_epsilon(EPS_GRID)
    pairs = [brute_force(n, "v", "w", data, eps_local)
             for data in itertools.combinations_with_replacement("vwx", n - 1)]
    for (p1, q1), (p2, q2) in itertools.product(pairs, repeat=2):
        p = {(a, b): x * y for a, x in p1.items() for b, y in p2.items()}
        q = {(a, b): x * y for a, x in q1.items() for b, y in q2.items()}
        exact = np.array([hockey(p, q, e) for e in EPS_GRID])
        assert np.all(exact <= bound + 1e-12)


def brute_force_sampled(population: int, m: int, data: tuple[str, ...], eps_local: float
                        ) -> tuple[dict, dict]:
    """(sum at v, sum at w) given m participants, a uniform m-subset of the population."""
    subsets = list(itertools.combinations(range(population), m))

    def law(first: str) -> dict[tuple[int, int], float]:
        holders = (first, *data)
        out: dict[tuple[int, int], float] = {}
        for subset in subsets:
            part = outcome_law(tuple(holders[i] for i in subset), eps_local, 1 / len(subsets))
            for key, value in part.items():
                out[key] = out.get(key, 0.0) + value
        return out

    return law("v"), law("w")


@pytest.mark.parametrize(("population", "m", "eps_local"), [(4, 2, 1.5), (5, 3, 2.5)])
def test_sampled_round_dominates_brute_force(population: int, m: int, eps_local: float) -> None:
    bound = sum_pld.sampled_round_pld(eps_local, m, population).get_delta_for_epsilon(EPS_GRID)
    unsampled = sum_pld.round_pld(eps_local, m).get_delta_for_epsilon(EPS_GRID)
    assert np.all(bound <= unsampled + 2e-10)  # sampling never costs privacy given m
    for data in itertools.product("vwx", repeat=population - 1):
        p, q = brute_force_sampled(population, m, data, eps_local)
        for a, b in ((p, q), (q, p)):
            exact = np.array([hockey(a, b, e) for e in EPS_GRID])
            assert np.all(exact <= bound + 1e-12), data


def f0_epsilon(eps_local: float, n: int, rounds: int, pessimistic: bool) -> float:
    """The f = 0 pair through dp-accounting's own path (discretization 1e-5)."""
    r = sum_pld.rates(eps_local)
    _, count, _ = sum_pld.count_pmf(0, n - 1, r.a0)
    u, v = sum_pld.coordinate_pair(count, r)
    lu = {i: math.log(x) for i, x in enumerate(u)}
    lv = {i: math.log(x) for i, x in enumerate(v)}
    kw = {"pessimistic_estimate": pessimistic, "value_discretization_interval": 1e-5,
          "symmetric": True}
    fwd = pld.from_two_probability_mass_functions(lv, lu, **kw)
    rev = pld.from_two_probability_mass_functions(lu, lv, **kw)
    return float(fwd.compose(rev).self_compose(rounds).get_epsilon_for_delta(1e-6))


@pytest.mark.parametrize(("eps_local", "n"), [(8.47, 1_600_000), (7.25, 50_000), (4.0, 1400),
                                              (2.0, 200)])
def test_against_dp_accounting_f0_path(eps_local: float, n: int) -> None:
    ours = sum_pld.sum_epsilon(eps_local, 1e-6, [n] * 4)
    low = f0_epsilon(eps_local, n, 4, pessimistic=False)
    high = f0_epsilon(eps_local, n, 4, pessimistic=True)
    assert low <= ours  # the worst case is at least f = 0
    assert ours <= high + 5e-4  # and, at these scales, f = 0 is the worst case


def test_issue_figure() -> None:
    # issue 12: n = 1.6M, T = 4, delta 1e-6, eps_local 8.47 costs eps_agg 0.30
    assert sum_pld.sum_epsilon(8.47, 1e-6, [1_600_000] * 4) == pytest.approx(0.301, abs=2e-3)


def test_more_contributors_cost_less() -> None:
    eps = [sum_pld.sum_epsilon(6.0, 1e-6, [n] * 2) for n in (2_000, 4_000, 8_000)]
    assert eps[0] > eps[1] > eps[2]


def test_real_counts_compose_in_any_order() -> None:
    a = sum_pld.sum_epsilon(7.0, 1e-6, [20_000, 30_000, 20_000])
    b = sum_pld.sum_epsilon(7.0, 1e-6, [30_000, 20_000, 20_000])
    assert a == pytest.approx(b, rel=1e-9)
    assert sum_pld.sum_epsilon(7.0, 1e-6, [20_000] * 3) > a


def test_rates_are_the_implemented_thresholds() -> None:
    rr = RandomizedResponse(5.0)
    r = sum_pld.rates(5.0)
    assert (r.a1, r.a0) == (rr.a1, rr.a0)
    assert r.effective_epsilon == pytest.approx(math.log((1 - rr.a0) / rr.a0), abs=1e-12)


@pytest.mark.parametrize(("k", "p"), [(1_600_000, 2.1e-4), (5_000, 0.5), (300, 0.03), (40, 0.9)])
def test_binomial_window_against_exact_arithmetic(k: int, p: float) -> None:
    getcontext().prec = 60
    lo, pmf, tail = sum_pld.binomial_window(k, p, 1e-30)
    dp = Decimal(p)  # the float's exact value
    for j in (0, len(pmf) // 3, len(pmf) // 2, len(pmf) - 1):
        exact = Decimal(math.comb(k, lo + j)) * dp ** (lo + j) * (1 - dp) ** (k - lo - j)
        assert abs(Decimal(float(pmf[j])) - exact) <= Decimal("1e-12") * exact
    inside = sum(Decimal(float(x)) for x in pmf)
    assert tail <= 1e-30
    assert float(1 - inside) <= tail + 1e-13  # what the window leaves out is bounded


def test_holder_blocks_dominate_every_holder_count() -> None:
    for n, a0 in ((2, 0.1), (50, 0.2), (10_000, 1e-3), (1_600_000, 2e-5)):
        blocks = sum_pld.holder_blocks(n, a0)
        assert blocks[0] == (0, n - 1)  # no other holder: charged exactly
        for f in [*range(min(n, 3000)), n - 1]:
            # N_f = Bin(f, 1/2) + Bin(n-1-f, a0) is some block's count plus independent noise
            assert any(fair <= f and biased <= n - 1 - f for fair, biased in blocks), (n, f)


def test_dots_cover_and_are_increasing() -> None:
    grid = dots.grid(-0.7, 7.5, 5e-4, sum_pld.DISCRETIZATION)
    assert np.all(np.diff(grid) > 0)
    d = sum_pld.DISCRETIZATION
    assert grid[0] * d <= -0.7 and grid[-1] * d >= 7.5


def test_finer_dots_change_little() -> None:
    base = sum_pld.sum_epsilon(7.0, 1e-6, [20_000] * 4)
    old = sum_pld.DISCRETIZATION
    try:
        sum_pld.DISCRETIZATION = old / 4
        sum_pld.coordinate_profile.cache_clear()
        sum_pld.round_pld.cache_clear()
        fine = sum_pld.sum_epsilon(7.0, 1e-6, [20_000] * 4)
    finally:
        sum_pld.DISCRETIZATION = old
        sum_pld.coordinate_profile.cache_clear()
        sum_pld.round_pld.cache_clear()
    assert abs(base - fine) < 1e-4  # both are valid bounds; the grids are not nested


@pytest.mark.parametrize(("eps_local", "n", "population"),
                         [(8.0, 200_000, None), (3.0, 500, None), (7.0, 50_000, 100_000)])
def test_the_plds_are_genuine_pairs(eps_local: float, n: int, population: int | None) -> None:
    # connect-the-dots clips negative masses: the PMF must still be a probability distribution
    # whose e^-loss mass (the other distribution) is at most 1, or the profile identities and
    # the composition theorem would not apply. Both masses are summed from the PMF itself: read
    # off two deltas instead (total - delta(eps) = e^eps * other below every loss), the
    # difference of two numbers near 1, times e^(2 eps_local + 1), turned one ulp of rounding
    # into 2.7e-9, above the tolerance (numpy 2.2.6 and scipy 1.14.1 gave 1 + 1.7e-9 that way,
    # 1 + 2.7e-14 summed directly).
    if population is None:
        dist = sum_pld.round_pld(eps_local, n)
    else:
        dist = sum_pld.sampled_round_pld(eps_local, n, population)
    total, other = _masses(dist)
    assert total == pytest.approx(1.0, abs=1e-9)
    assert other <= 1.0 + 1e-9


def _masses(dist: Any) -> tuple[float, float]:
    """(all mass, infinite losses included; the e^-loss mass of the finite losses) of a PLD's
    PMF, from dp-accounting's dense representation (its attributes, pinned below 0.7)."""
    pmf = dist._pmf_remove.to_dense_pmf()
    losses = (pmf._lower_loss + np.arange(pmf.size)) * pmf._discretization
    probs = np.asarray(pmf._probs, dtype=float)
    return float(probs.sum() + pmf._infinity_mass), float(np.sum(probs * np.exp(-losses)))


def test_many_contributors_at_small_eps_are_accounted_at_fewer() -> None:
    # (n - 1) a0 above LAMBDA_MAX: charged at fewer contributors, a dominating (valid) bound
    n = 10_000_000
    fewer = sum_pld.accounted_contributors(0.5, n)
    assert fewer < n
    assert sum_pld.sum_epsilon(0.5, 1e-6, [n]) == sum_pld.sum_epsilon(0.5, 1e-6, [fewer])
    assert sum_pld.accounted_contributors(10.0, n) == n


def test_effective_epsilon_is_not_below_the_coins_ratio() -> None:
    # The cap of sum_epsilon (basic composition over the rounds) must be at least what the
    # implemented coins guarantee: (2^32 - m) / m <= e^eps_eff, decided exactly. Before, the
    # float difference of two logs was below it for ~60% of epsilons (eps_local = 2 among them).
    from fractions import Fraction

    from fedhh.device.randomizer import SCALE, a0_threshold
    from fedhh.privacy.randomizer_class import at_most_exp

    rng = np.random.default_rng(20261204)
    for eps in [2.0, 1e-9, 22.0, 40.0, *rng.uniform(1e-6, 23.0, size=60)]:
        eps = float(eps)
        m = a0_threshold(eps)
        effective = sum_pld.rates(eps).effective_epsilon
        assert at_most_exp(Fraction(SCALE - m, m), effective), eps
        assert effective <= math.log((SCALE - m) / m) + 1e-12  # (and not loose)
    # the cap binds at two devices and a tiny delta: 3 rounds at 2 get at least 3 e_eff exactly
    m = a0_threshold(2.0)
    capped = sum_pld.sum_epsilon(2.0, 1e-300, [2, 2, 2])
    assert at_most_exp(Fraction(SCALE - m, m) ** 3, capped)
