"""Recall is given at each top k whose top is not a smaller k's again (``reached_ranks``):
over 10 items, the top 100, 1,000 and 10,000 are the top 10, and their recall was the top
10's figure three times more (`fedhh simulate` printed "top-10 1.00, top-100 1.00,
top-1000 1.00, top-10000 1.00"), read as three more findings. ``held_items`` says how many
items the users hold, which caps every top. Every top k keeps its key, null past the ranked
ones, and ``recall_at_null`` says why: before, the keys stopped there, and a JSON reader of
``recall_at["1000"]`` over 10 items met a KeyError."""

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
        recall = report[which]["recall_at"]
        assert list(recall) == [str(k) for k in TOP_K]
        assert [k for k, v in recall.items() if v is not None] == keys
    past = [f"{k:,}" for k in TOP_K[len(keys):]]
    assert report["recall_at_null"] == (
        f"the users hold {items} items, every one in the top {keys[-1]}: there is no top "
        f"{', '.join(past[:-1])} or {past[-1]}")
    # (the largest k reached counts every item: half of them found)
    assert report["weighted"]["recall_at"][keys[-1]] == pytest.approx((items // 2) / items)


def test_recall_at_null_is_null_where_every_top_is_ranked_or_none_is() -> None:
    every = 20_000
    codes = np.arange(1, every + 1, dtype=np.uint64)
    truth = Truth(codes, np.full(every, 1 / every), np.full(every, 0.5))
    report = evaluate(codes[:10], truth)
    assert report["recall_at_null"] is None
    assert None not in report["weighted"]["recall_at"].values()
    nobody = evaluate([], Truth(codes[:0], np.zeros(0), np.zeros(0)))
    assert nobody["weighted"]["recall_at"] == {str(k): None for k in TOP_K}
    assert nobody["recall_at_null"] == "no user holds an item: there is no top k"
