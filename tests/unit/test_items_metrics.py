"""The weight ratio of an output that holds the whole true top list is 1 and its utility loss
0, never above or below by a rounding: the two sums add the same frequencies in different
orders, and ``fedhh simulate`` printed "utility loss: weighted -0.0000" for a run that found
all twelve items of a population."""

from __future__ import annotations

import numpy as np

from fedhh.metrics import Truth, evaluate


def test_whole_top_list_has_ratio_one_and_loss_zero() -> None:
    rng = np.random.default_rng(36)
    rounded = 0
    for _ in range(200):
        size = int(rng.integers(5, 40))
        codes = np.sort(rng.choice(1 << 40, size, replace=False)).astype(np.uint64)
        weighted = rng.dirichlet(np.ones(size))
        unweighted = rng.random(size)
        truth = Truth(codes, weighted, unweighted)
        order = codes.copy()
        rng.shuffle(order)
        by_code = float(weighted.sum())
        by_rank = float(np.sort(weighted)[::-1].sum())
        rounded += by_code != by_rank  # (the sums this test is about)
        report = evaluate(order, truth)
        for which in ("weighted", "unweighted"):
            assert report[which]["weight_ratio"] <= 1.0
            assert report[which]["utility_loss"] >= 0.0
            assert abs(report[which]["utility_loss"]) < 1e-12
    assert rounded  # (some draw's two orders round apart: the case is exercised)
