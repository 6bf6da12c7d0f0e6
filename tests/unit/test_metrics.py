"""Metrics against hand-computed values: weight ratio, utility loss, false positives, recall,
the sliding-window curve, and exact user counts for codes shared by several items."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.data.dataset import from_user_counts
from fedhh.metrics import Truth, evaluate, marginal_curve


def small_truth() -> Truth:
    codes = np.array([10, 20, 30, 40], dtype=np.uint64)
    weighted = np.array([0.4, 0.3, 0.2, 0.1])
    unweighted = np.array([0.5, 0.6, 0.1, 0.2])
    return Truth(codes, weighted, unweighted)


def test_weight_ratio_and_false_positives_by_hand() -> None:
    report = evaluate([20, 40, 99], small_truth())  # 99 is held by nobody
    w = report["weighted"]
    # WR = (0.3 + 0.1 + 0) / (0.4 + 0.3 + 0.2)
    assert w["weight_ratio"] == pytest.approx(0.4 / 0.9)
    assert w["utility_loss"] == pytest.approx(1 - 0.4 / 0.9)
    assert (w["true_positives"], w["false_positives"]) == (2, 1)
    assert w["false_positive_ratio"] == pytest.approx(1 / 3)
    assert w["recall_at"]["10"] == pytest.approx(0.5)
    u = report["unweighted"]
    assert u["weight_ratio"] == pytest.approx((0.6 + 0.2) / (0.6 + 0.5 + 0.2))


def test_marginal_curve_windows() -> None:
    found, top = marginal_curve([10, 30, 40], small_truth(), "weighted", window=1)
    assert found.tolist() == pytest.approx([0.4, 0.6, 0.3])
    assert top.tolist() == pytest.approx([0.4, 0.7, 0.5])


def test_users_holding_a_shared_code_are_counted_once() -> None:
    # Items 0 and 1 share a code: user 0 holds both, user 1 only item 1.
    ds = from_user_counts([{"x": 1, "y": 1}, {"y": 2}, {"z": 1}])
    item_codes = np.array([7, 7, 9], dtype=np.uint64)
    truth = Truth.from_items(item_codes, np.array([0.25, 0.5, 0.25]),
                             np.array([1 / 3, 2 / 3, 1 / 3]), ds)
    assert truth.codes.tolist() == [7, 9]
    assert truth.weighted.tolist() == pytest.approx([0.75, 0.25])
    assert truth.unweighted.tolist() == pytest.approx([2 / 3, 1 / 3])


@pytest.mark.parametrize("k", [0, 1, 3, 7, 50, 200, 201, 500])
def test_top_codes_equal_the_full_ranking(k: int) -> None:
    """Ties (repeated frequencies, zeros) are ordered by code, as a full sort orders them."""
    rng = np.random.default_rng(k)
    codes = np.sort(rng.choice(10**6, size=200, replace=False)).astype(np.uint64)
    freq = rng.choice([0.0, 0.01, 0.02, 0.05, 0.1], size=200)
    truth = Truth(codes, freq, freq[::-1].copy())
    for which, dist in (("weighted", freq), ("unweighted", freq[::-1])):
        order = np.lexsort((codes, -dist))[:k]
        assert truth.top_codes(which, k).tolist() == codes[order[dist[order] > 0]].tolist()
