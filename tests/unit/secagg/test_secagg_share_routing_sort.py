"""The key sharing's close orders every share of the stage by recipient, then sender (n x k
entries, its one sort over the whole stage): by radix, linear in the entries, where lexsort
compared them, log(n k) a share (6.2 us a device at a shard of 2,500, 10.1 at 25,000: a term
of a worker's cost that grew with n, issue 30). Counted, not timed: which sorts ran over the
stage's entries, and the round still releases the exact sum."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from secagg_testkit import assert_correct, drive_to, small_cohort

from fedhh.secagg.messages import Stage
from fedhh.secagg.server import SecAggServer


def test_the_shares_are_routed_by_one_radix_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = drive_to(small_cohort(n=40, k=10, t=6, n_min=20, dimension=16), Stage.SHARE_KEYS)
    shares = sum(len(request.roster) - 1 for request in driver.pending.values())
    sorts: list[tuple[str, Any, int]] = []  # (function, key dtype, entries) in the close
    closing = False
    argsort, lexsort = np.argsort, np.lexsort

    def spy_argsort(a: np.ndarray, *args: Any, **kw: Any) -> np.ndarray:
        if closing:
            sorts.append(("argsort", a.dtype, a.size))
        return argsort(a, *args, **kw)

    def spy_lexsort(keys: Any, *args: Any, **kw: Any) -> np.ndarray:
        if closing:
            sorts.append(("lexsort", None, np.asarray(keys).shape[-1]))
        return lexsort(keys, *args, **kw)

    close = SecAggServer._close_share_keys

    def watched(self: SecAggServer) -> Any:
        nonlocal closing
        closing = True
        try:
            return close(self)
        finally:
            closing = False

    monkeypatch.setattr(np, "argsort", spy_argsort)
    monkeypatch.setattr(np, "lexsort", spy_lexsort)
    monkeypatch.setattr(SecAggServer, "_close_share_keys", watched)
    while driver.server.stage == Stage.SHARE_KEYS:
        driver.step()
    # (the routing's sort, and the share holders' table, n x k cells, sorted by holder)
    over_the_stage = {s for s in sorts if s[2] >= shares}
    assert over_the_stage == {("argsort", np.dtype(np.uint16), shares)}
    while not driver.finished:
        driver.step()
    assert_correct(driver.outcome)
