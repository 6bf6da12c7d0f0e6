"""End to end in the simulator: planted items above a computable count are all found at
eps_local = 8, and a population with no repeated item yields nothing."""

from __future__ import annotations

import string
from dataclasses import replace

import numpy as np
from scipy import stats

from fedhh.config import RunConfig
from fedhh.data.dataset import from_user_counts
from fedhh.device import RandomizedResponse
from fedhh.server.estimate import BinomialTail
from fedhh.simulation.runner import simulate

EPS = 8.0
P = 2**20
GAMMA = 0.5
ETA = 0.5


def random_words(count: int, rng: np.random.Generator) -> list[str]:
    letters = np.array(list(string.ascii_lowercase))
    return ["".join(rng.choice(letters, size=9)) for _ in range(count)]


def count_found_surely(n: int) -> int:
    """Smallest count whose item beats the largest threshold PruneHH can reach with
    probability 1 - 1e-9 per round.

    While a planted item is kept, the loop stops once E <= gamma / |D|, so E > eta gamma / |D|
    and the threshold is at most x_max = isf(eta gamma / P). An item selected by c devices has
    sum S >= Bin(c, a1) (the other devices add non-negative terms), so it clears x_max when
    Bin(c, 1/2) > k_max, with k_max the sum that x_max corresponds to.
    """
    rr = RandomizedResponse(EPS)
    tail = BinomialTail(n, rr)
    x_max = tail.isf(ETA * GAMMA / P)
    k_max = int(np.ceil(n * rr.a0 + x_max * (rr.a1 - rr.a0)))
    c = k_max
    while stats.binom.cdf(k_max, c, 0.5) > 1e-9:
        c += 1
    return c


def test_planted_items_above_the_computable_count_are_found() -> None:
    rng = np.random.default_rng(4)
    n = 30_000
    c_min = count_found_surely(n)
    planted = {"apple": c_min, "be": c_min + 10, "cherrypie": 2 * c_min, "zebrafish": c_min}
    users = [{w: 1} for w, c in planted.items() for _ in range(c)]
    users += [{w: 1} for w in random_words(n - len(users), rng)]
    dataset = from_user_counts(users)
    config = RunConfig(rounds=4, dim_limit=P, fp_ratio=GAMMA, eta=ETA, eps_local=EPS, seed=1)
    result = simulate(dataset, config)
    found = {h.item for h in result.heavy_hitters}
    assert set(planted) <= found, (c_min, found)


def test_no_repeated_items_means_nothing_found() -> None:
    """With gamma = 1e-7 for every element (``fp_ratio_finished=None``: the default target of
    0.1 for elements that finish an item lets a kept set of one such element be noise with
    probability up to 0.1, which the codec's change of round plans exposed at seed 2) the loop
    only stops with a kept set once E |D| <= 1e-7 * kept, so a null element survives a round
    with probability about 1e-7; count-1 items raise that by a small factor: a false failure
    below 1e-6."""
    rng = np.random.default_rng(5)
    dataset = from_user_counts([{w: 1} for w in random_words(20_000, rng)])
    config = RunConfig(rounds=4, dim_limit=P, fp_ratio=1e-7, fp_ratio_finished=None,
                       eps_local=EPS, seed=2)
    result = simulate(dataset, config)
    assert result.heavy_hitters == []


def test_deny_list_and_two_runs() -> None:
    """A deny-listed item is never reported but stays in the output; in the two-run mode the
    first run's discoveries are the second run's deny list."""
    rng = np.random.default_rng(8)
    users = [{"apple": 1, "pear": 1} for _ in range(3000)] + \
        [{"melon": 1} for _ in range(2000)]
    users += [{w: 1} for w in random_words(5000, rng)]
    dataset = from_user_counts(users)
    base = RunConfig(rounds=4, dim_limit=P, eps_local=EPS, seed=3)
    long = "https://example.com/" + "x" * 200  # longer than any code: denied by its prefix
    denied = simulate(dataset, replace(base, deny_list=("zucchini", "apple", long)))
    assert "apple" not in {h.item for h in denied.heavy_hitters}
    assert {"pear", "melon"} <= {h.item for h in denied.heavy_hitters}
    assert denied.deny_list == ["zucchini", "apple", long]  # as given, in the given order
    twice = simulate(dataset, replace(base, two_runs=True))
    assert {r["extra"]["run"] for r in twice.rounds} == {1, 2}
    second = {h.item for h in twice.heavy_hitters}
    first = {h.item: h for h in twice.earlier_runs}  # with their flags, apart from a deny list
    assert {"apple", "pear", "melon"} <= set(first) and twice.deny_list == []
    assert all(first[item].ended for item in ("apple", "pear", "melon"))
    assert not second & {"apple", "pear", "melon"}
