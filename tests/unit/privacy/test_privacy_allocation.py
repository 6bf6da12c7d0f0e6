"""Per-round budget allocations (issue 15): unequal local epsilons per round, accounted by
composing each round's own privacy loss distribution; checked against compositions made by
hand, the Gaussian approximation of the cost, and the equal split they must reduce to."""

from __future__ import annotations

import math

import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy import PrivacyLedger, solve_local_epsilon, sum_pld
from fedhh.privacy.accountant import aggregate_epsilon, allocation_offsets
from fedhh.privacy.solver import solve_allocation

DELTA = 1e-6


def by_hand(epsilons: list[float], counts: list[int]) -> float:
    """Compose the rounds' PLDs one by one, last round first (another order, another path)."""
    total = None
    for eps, n in reversed(list(zip(epsilons, counts, strict=True))):
        pld = sum_pld.round_pld(eps, n)
        total = pld if total is None else total.compose(pld, sum_pld.COMPOSE_TRUNCATION)
    assert total is not None
    return float(total.get_epsilon_for_delta(DELTA))


def test_unequal_rounds_compose_like_a_composition_by_hand() -> None:
    epsilons, counts = [6.0, 5.0, 5.5], [20_000, 20_000, 15_000]
    assert sum_pld.sum_epsilon(epsilons, DELTA, counts) == pytest.approx(
        by_hand(epsilons, counts), rel=1e-9)


def test_an_equal_allocation_is_the_equal_split_exactly() -> None:
    plain = aggregate_epsilon(7.0, DELTA, 4, 50_000)
    zero = aggregate_epsilon(7.0, DELTA, 4, 50_000, offsets=(0.0, 0.0, 0.0, 0.0))
    assert zero.eps_agg == plain.eps_agg
    assert solve_allocation(1.0, DELTA, allocation_offsets([3, 3, 3, 3]), 50_000
                            ).eps_local == solve_local_epsilon(1.0, DELTA, 4, 50_000).eps_local


def test_offsets_are_log_shares_of_the_largest() -> None:
    assert allocation_offsets([2, 1, 1, 1]) == pytest.approx(
        (0.0, -math.log(2), -math.log(2), -math.log(2)))
    for bad in ([], [1, 0], [1, -2], [1, math.inf]):
        with pytest.raises(PrivacyError, match="allocation"):
            allocation_offsets(bad)


def test_solver_finds_the_largest_feasible_allocation() -> None:
    offsets = allocation_offsets([2, 1, 1, 1])
    n = 200_000
    solution = solve_allocation(1.0, DELTA, offsets, n)
    eps = solution.eps_local

    def total(base: float) -> float:
        return by_hand([base + o for o in offsets], [n] * 4)

    assert total(eps) <= 1.0 + 1e-9
    assert total(eps + 2e-3) > 1.0  # the tolerance is 1e-3: a little more does not fit
    assert solution.eps_agg_achieved == pytest.approx(total(eps), rel=1e-9)
    assert any("per-round allocation" in note for note in solution.notes)


def test_the_allocation_costs_what_the_gaussian_approximation_says() -> None:
    # At large n a round's cost is proportional to e^eps: weights (2, 1, 1, 1) cost
    # e^base (1 + 3/2) against 4 e^equal, so base = equal + log(4 / 2.5).
    n = 400_000
    equal = solve_local_epsilon(1.0, DELTA, 4, n).eps_local
    base = solve_allocation(1.0, DELTA, allocation_offsets([2, 1, 1, 1]), n)
    assert base.eps_local - equal == pytest.approx(math.log(4 / 2.5), abs=0.02)


def test_ledger_charges_each_round_at_its_own_epsilon() -> None:
    offsets = allocation_offsets([1, 1, 2])
    n = 30_000
    ledger = PrivacyLedger.open_allocated(1.0, DELTA, offsets, n)
    assert [ledger.round_epsilon(i) for i in range(3)] == pytest.approx(
        [ledger.eps_local + o for o in offsets])
    for i, count in enumerate((n, n + 500, n + 9)):
        ledger = ledger.record(i, count)
    expected = by_hand([ledger.round_epsilon(i) for i in range(3)], [n, n + 500, n + 9])
    assert ledger.spent_epsilon() == pytest.approx(expected, rel=1e-9)
    assert ledger.spent_epsilon() <= 1.0 * (1 + 1e-9)
    again = PrivacyLedger.from_dict(ledger.to_dict())
    assert again.offsets == ledger.offsets and again.spent_epsilon() == ledger.spent_epsilon()


def test_ledger_projects_unequal_rounds_not_yet_charged() -> None:
    offsets = allocation_offsets([3, 1])
    n = 30_000
    ledger = PrivacyLedger.open_allocated(1.0, DELTA, offsets, n)
    one = ledger.record(1, n)  # the cheap round first
    assert one.projected_epsilon() == pytest.approx(
        by_hand([ledger.round_epsilon(1), ledger.round_epsilon(0)], [n, n]), rel=1e-9)
    # Charged below n_min the big round would not fit.
    assert not one.check(0, n // 3).accepted


def test_allocations_are_refused_where_they_are_not_accounted() -> None:
    with pytest.raises(PrivacyError, match="sum method only"):
        PrivacyLedger.open_allocated(1.0, DELTA, (0.0, -0.5), 10_000, method="clones",
                                     eps_local=3.0)
    with pytest.raises(PrivacyError, match="eps_local of round 2"):
        PrivacyLedger.open_allocated(1.0, DELTA, (0.0, -0.7), 10_000, eps_local=0.5)
    with pytest.raises(PrivacyError, match="<= 0"):
        solve_allocation(1.0, DELTA, (0.3, 0.0), 10_000)
    data = PrivacyLedger.open_allocated(1.0, DELTA, (0.0, -0.5), 10_000).to_dict()
    data["offsets"] = [0.0]
    with pytest.raises(PrivacyError, match="offsets for"):
        PrivacyLedger.from_dict(data)
