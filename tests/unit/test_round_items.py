"""Several items per report (issue 15, ``round_items``): a device reports up to k distinct items
of its eligible ones, drawn without replacement by the selection rule, one bit per element;
the sum method charges a round of k items as k compositions of the one-hot round. The
distribution test is a chi-square test at significance 1e-7 (a correct implementation fails
with probability at most 1e-7; seeds are fixed)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from fedhh.codec import Codec
from fedhh.config import RunConfig
from fedhh.data.dataset import FederatedDataset, from_user_counts
from fedhh.device.selection import (
    NOTHING,
    Eligibility,
    Selection,
    SelectionRule,
    select_block,
    select_many,
)
from fedhh.errors import ConfigError, PrivacyError
from fedhh.privacy import PrivacyLedger, sum_pld
from fedhh.privacy.accountant import allocation_offsets, repeat_offsets
from fedhh.privacy.solver import solve_allocation
from fedhh.server import PrefixTree
from fedhh.simulation.population import Population
from fedhh.simulation.runner import prepare, simulate

ALPHA = 1e-7
DELTA = 1e-6
UNIFORM = Selection(SelectionRule.UNIFORM, True)


def block(users: int, items_per_user: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indptr = np.arange(users + 1, dtype=np.int64) * items_per_user
    items = np.tile(np.arange(items_per_user, dtype=np.int32), users)
    return indptr, items, np.ones(items.size, dtype=np.int64)


# ---- selection --------------------------------------------------------------------------------
def test_the_first_draw_is_the_one_item_draw() -> None:
    indptr, items, counts = block(5_000, 6)
    everything = Eligibility.everything(6)
    one = select_block(indptr, items, counts, everything, UNIFORM, np.random.default_rng(3))
    many = select_many(indptr, items, counts, everything, UNIFORM, np.random.default_rng(3), 3)
    assert many.shape == (5_000, 3)
    assert np.array_equal(many[:, 0], one)


def test_draws_are_distinct_and_a_short_list_is_drawn_whole() -> None:
    indptr = np.array([0, 1, 3, 7, 7], dtype=np.int64)  # users with 1, 2, 4 and 0 items
    items = np.array([0, 1, 2, 0, 1, 2, 3], dtype=np.int32)
    counts = np.ones(items.size, dtype=np.int64)
    chosen = select_many(indptr, items, counts, Eligibility.everything(4), UNIFORM,
                         np.random.default_rng(0), 3)
    assert sorted(chosen[0].tolist()) == [NOTHING, NOTHING, 0]
    assert sorted(chosen[1].tolist()) == [NOTHING, 1, 2]
    assert len(set(chosen[2].tolist())) == 3 and all(3 <= c < 7 for c in chosen[2].tolist())
    assert chosen[3].tolist() == [NOTHING] * 3


def test_two_uniform_draws_are_a_uniform_pair() -> None:
    users, m = 120_000, 5
    indptr, items, counts = block(users, m)
    chosen = select_many(indptr, items, counts, Eligibility.everything(m), UNIFORM,
                         np.random.default_rng(11), 2)
    local = np.sort(chosen - indptr[:-1, None], axis=1)
    pairs = list(itertools.combinations(range(m), 2))
    index = {p: i for i, p in enumerate(pairs)}
    observed = np.bincount([index[(a, b)] for a, b in local.tolist()], minlength=len(pairs))
    assert stats.chisquare(observed).pvalue > ALPHA


def test_weighted_draws_follow_successive_sampling() -> None:
    # Counts 3, 1: the first draw is item 0 w.p. 3/4; a second draw takes the other item.
    users = 100_000
    indptr = np.arange(users + 1, dtype=np.int64) * 2
    items = np.tile(np.array([0, 1], dtype=np.int32), users)
    counts = np.tile(np.array([3, 1]), users)
    chosen = select_many(indptr, items, counts, Eligibility.everything(2),
                         Selection(SelectionRule.WEIGHTED, True), np.random.default_rng(5), 2)
    first = chosen[:, 0] - indptr[:-1]
    assert np.all(np.sort(chosen - indptr[:-1, None], axis=1) == [0, 1])
    assert stats.binomtest(int(np.sum(first == 0)), users, 0.75).pvalue > ALPHA


def test_excluding_entries_is_refused_without_prefix_conditioning() -> None:
    indptr, items, counts = block(3, 4)
    with pytest.raises(ConfigError, match="excluding entries needs selection conditioned"):
        select_block(indptr, items, counts, Eligibility.everything(4),
                     Selection(SelectionRule.UNIFORM, False), np.random.default_rng(0),
                     np.zeros(items.size, dtype=bool))


def test_unconditioned_selection_is_refused_with_several_items() -> None:
    indptr, items, counts = block(3, 2)
    with pytest.raises(ConfigError, match="conditioned"):
        select_many(indptr, items, counts, Eligibility.everything(2), Selection(
            SelectionRule.UNIFORM, False), np.random.default_rng(0), 2)
    with pytest.raises(ConfigError, match="at least one"):
        select_many(indptr, items, counts, Eligibility.everything(2), UNIFORM,
                    np.random.default_rng(0), 0)


# ---- the simulated round ----------------------------------------------------------------------
CODEC = Codec("5bit", 60)
WORDS = ("apple", "apricot", "banana", "berry", "cherry", "melon")


@pytest.fixture(scope="module")
def fruit() -> FederatedDataset:
    rng = np.random.default_rng(1)
    users = []
    for _ in range(3_000):
        chosen = rng.choice(len(WORDS), size=int(rng.integers(1, 5)), replace=False)
        users.append({WORDS[i]: 1 for i in chosen})
    return from_user_counts(users, name="fruit")


def first_query(config: RunConfig) -> object:
    tree = PrefixTree(config.tree(), CODEC, prepare(config, 3_000).mechanism)
    return tree.query(tree.initial_state())


@pytest.mark.parametrize("bits", [5, 10])
def test_enough_items_report_every_element_once(fruit: FederatedDataset, bits: int) -> None:
    # With k >= a device's items it reports every element it holds, once: c_w is the number of
    # devices holding an item under w, whatever the seed. At 5 bits "apple" and "apricot" share
    # the element "a"; a device holding both sets it once.
    config = RunConfig(codec="5bit", segment_bits=bits, rounds=12, round_items="4")
    query = first_query(config)
    population = Population.build(fruit, CODEC)
    sets = population.selected_domain_sets(query, UNIFORM, np.random.SeedSequence(9), 4)
    counts = np.bincount(sets[sets >= 0], minlength=query.domain_size)
    expected = np.zeros(query.domain_size, dtype=np.int64)
    for u in range(fruit.num_users):
        ids, _ = fruit.user_items(u)
        heads = {CODEC.prefix(CODEC.encode(fruit.vocabulary[int(i)]), bits) for i in ids}
        for head in heads:
            expected[int(head)] += 1
    assert np.array_equal(counts, expected)
    # One item per device: the one-hot column of the same draws.
    one = population.selected_domain_sets(query, UNIFORM, np.random.SeedSequence(9), 1)
    assert np.array_equal(one[:, 0], population.selected_domain_indices(
        query, UNIFORM, np.random.SeedSequence(9)))


# ---- configuration ----------------------------------------------------------------------------
def test_round_items_parse_and_default() -> None:
    assert RunConfig().items_per_round() is None
    assert RunConfig(round_items="1,1,1,1").items_per_round() is None
    assert RunConfig(round_items="2").items_per_round() == (2, 2, 2, 2)
    assert RunConfig(round_items="3,1,1,2").items_per_round() == (3, 1, 1, 2)


@pytest.mark.parametrize(("values", "match"), [
    ({"round_items": "0"}, ">= 1"),
    ({"round_items": "2,x,1,1"}, "counts"),
    ({"round_items": "2,1"}, "2 counts for 4 rounds"),
    ({"round_items": "2", "privacy_method": "clones"}, "sum method"),
    ({"round_items": "2", "randomizer": "pi-rappor"}, "ohe-rr"),
    ({"round_items": "2", "eps_local": 5.0}, "solved"),
    ({"round_items": "2", "single_item": True}, "several items"),
    ({"round_items": "2", "per_device": True}, "exact mode"),
    ({"round_items": "2", "prefix_conditioning": False}, "conditioned"),
])
def test_round_items_are_refused_where_not_accounted(values: dict[str, object],
                                                     match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RunConfig(**values).validate()  # type: ignore[arg-type]


# ---- accounting -------------------------------------------------------------------------------
def test_a_round_of_k_items_is_charged_as_k_rounds() -> None:
    offsets = allocation_offsets([2, 1, 1])
    assert repeat_offsets(offsets, [2, 1, 3]) == pytest.approx(
        (0.0, 0.0, -math.log(2), -math.log(2), -math.log(2), -math.log(2)))
    for bad in ([2, 1], [0, 1, 1], [1.5, 1, 1]):
        with pytest.raises(PrivacyError):
            repeat_offsets(offsets, bad)  # type: ignore[arg-type]
    n = 40_000
    ledger = PrivacyLedger.open_allocated(1.0, DELTA, offsets, n, items=(2, 1, 1))
    assert ledger.eps_local == solve_allocation(
        1.0, DELTA, repeat_offsets(offsets, [2, 1, 1]), n).eps_local
    assert ledger.eps_local < PrivacyLedger.open_allocated(1.0, DELTA, offsets, n).eps_local
    ledger = ledger.record(0, n).record(1, n)
    epsilons = [ledger.eps_local + o for o in (offsets[0], offsets[0], offsets[1])]
    assert ledger.spent_epsilon() == sum_pld.sum_epsilon(epsilons, DELTA, [n] * 3)
    assert ledger.record(2, n).spent_epsilon() <= 1.0 + 1e-9
    again = PrivacyLedger.from_dict(ledger.to_dict())
    assert again.items == (2, 1, 1) and again.spent_epsilon() == ledger.spent_epsilon()
    with pytest.raises(PrivacyError, match="sum method"):
        PrivacyLedger.open_allocated(1.0, DELTA, (0.0, 0.0), n, method="clones", items=(2, 1))


def test_the_charge_covers_the_exact_two_item_round_and_one_charge_does_not() -> None:
    # The exact released sums of a round where device 1 reports {v1, v2} against {w1, w2}
    # and nobody else holds them (f = 0): coordinates (v1, v2, w1, w2) are (U, U, V, V)
    # against (V, V, U, U), U = N + Bern(a1), V = N + Bern(a0), N = Bin(n - 1, a0). Its
    # hockey-stick divergence at the epsilon charged for two compositions stays within delta;
    # at the one-hot round's epsilon it does not (charging once would understate the cost).
    n, eps, delta = 12, 2.0, 1e-3
    r = sum_pld.rates(eps)
    others = stats.binom.pmf(np.arange(n), n - 1, r.a0)
    u = np.convolve(others, [1 - r.a1, r.a1])
    v = np.convolve(others, [1 - r.a0, r.a0])

    def joint(*parts: np.ndarray) -> np.ndarray:
        out = np.ones(1)
        for part in parts:
            out = np.multiply.outer(out, part).ravel()
        return out

    p, q = joint(u, u, v, v), joint(v, v, u, u)

    def divergence(e: float) -> float:
        return float(np.sum(np.maximum(p - math.exp(e) * q, 0.0)))

    assert divergence(sum_pld.sum_epsilon([eps, eps], delta, [n, n])) <= delta
    assert divergence(sum_pld.sum_epsilon([eps], delta, [n])) > 10 * delta


def test_a_simulation_charges_every_item(fruit: FederatedDataset) -> None:
    base = RunConfig(codec="5bit", rounds=12, segment_bits=5, dim_limit=2**16, seed=2)
    plain = simulate(fruit, base)
    several = simulate(fruit, RunConfig(**{**base.overrides(), "round_items": "3"}))
    ledger = several.ledger
    assert ledger is not None and ledger.items == (3,) * 12
    assert several.privacy["round_items"] == [3] * 12
    assert ledger.eps_local == solve_allocation(1.0, DELTA, (0.0,) * 36, 3_000).eps_local
    assert ledger.spent_epsilon() <= 1.0 + 1e-9
    assert plain.ledger is not None and ledger.eps_local < plain.ledger.eps_local
