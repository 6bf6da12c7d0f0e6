"""Recall is given at each top k whose top is not a smaller k's again (``reached_ranks``):
over 10 items, the top 100, 1,000 and 10,000 are the top 10, and their recall was the top
10's figure three times more (`fedhh simulate` printed "top-10 1.00, top-100 1.00,
top-1000 1.00, top-10000 1.00"), read as three more findings. ``held_items`` says how many
items the users hold, which caps every top."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.metrics import TOP_K, Truth, evaluate, reached_ranks


@pytest.mark.parametrize(("held", "ranks"), [
    (0, []), (4, [10]), (10, [10]), (50, [10, 100]), (100, [10, 100]),
    (500, [10, 100, 1000]), (5000, list(TOP_K)), (10000, list(TOP_K)), (20000, list(TOP_K)),
])
def test_the_ranks_a_ranking_reaches(held: int, ranks: list[int]) -> None:
    assert reached_ranks(TOP_K, held) == ranks


@pytest.mark.parametrize(("items", "keys"), [(10, ["10"]), (50, ["10", "100"]),
                                             (4, ["10"])])
def test_recall_at_names_no_top_twice(items: int, keys: list[str]) -> None:
    codes = np.arange(1, items + 1, dtype=np.uint64)
    weighted = np.linspace(2.0, 1.0, items)
    truth = Truth(codes, weighted / weighted.sum(), np.full(items, 0.5))
    report = evaluate(codes[: items // 2], truth)
    assert report["held_items"] == items
    for which in ("weighted", "unweighted"):
        assert list(report[which]["recall_at"]) == keys
    # (the largest k reached counts every item: half of them found)
    assert report["weighted"]["recall_at"][keys[-1]] == pytest.approx((items // 2) / items)
