"""The exact simulator draws the round sum from the same law as randomizing every report.

For a fixed population and query, K independent rounds are run in each mode and, for several
coordinates and for the total, the two samples are compared with a chi-square test of
homogeneity at significance 1e-7 (false failure at most 1e-7 per comparison, 4e-7 per test).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from fedhh.codec import Codec
from fedhh.data.dataset import from_user_counts
from fedhh.device import Selection, SelectionRule
from fedhh.server import LocalRandomizer, PrefixTree, TreeConfig
from fedhh.simulation.participation import Participation, SamplingKind
from fedhh.simulation.population import Population
from fedhh.simulation.rounds import SimulatedRounds

K = 2500


def homogeneous(a: np.ndarray, b: np.ndarray) -> bool:
    values = np.union1d(a, b)
    table = np.array([[np.count_nonzero(a == v) for v in values],
                      [np.count_nonzero(b == v) for v in values]])
    # Pool sparse cells so every expected count is at least 5.
    keep = table.sum(axis=0) >= 10
    pooled = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)])
    pooled = pooled[:, pooled.sum(axis=0) > 0]
    if pooled.shape[1] < 2:
        return True
    return stats.chi2_contingency(pooled).pvalue > 1e-7


def test_exact_and_per_device_sums_agree_in_distribution() -> None:
    users = [{"ab": 3, "ac": 1}, {"ab": 1}, {"b": 2, "ab": 1}, {"zz": 1}, {}] * 8
    dataset = from_user_counts(users)
    codec = Codec("5bit")
    population = Population.build(dataset, codec)
    mechanism = LocalRandomizer(1.0)
    tree = PrefixTree(TreeConfig(rounds=12, dim_limit=32), codec, mechanism)
    query = tree.query(tree.initial_state())  # 5-bit first symbol, domain 32
    selection = Selection(SelectionRule.WEIGHTED)
    participation = Participation(SamplingKind.POISSON, 0.8)
    samples = {}
    for per_device in (False, True):
        rows = []
        for seed in range(K):
            rounds = SimulatedRounds(population, mechanism, selection, participation, seed,
                                     per_device=per_device)
            rows.append(rounds.aggregate(query).sums)
        samples[per_device] = np.array(rows)
    a_index = 0  # "a"
    for column in (a_index, 1, 25):
        assert homogeneous(samples[False][:, column], samples[True][:, column])
    assert homogeneous(samples[False].sum(axis=1), samples[True].sum(axis=1))
