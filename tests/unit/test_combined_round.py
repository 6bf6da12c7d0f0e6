"""The combiner's sharded round (fedhh_aggregator.combined) with stand-in workers: a released
shard sum its signed config rules out is refused and the shard settled at once."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fedhh.secagg import RoundConfig, SignedConfig
from fedhh.secagg.config import StageDeadlines
from fedhh_aggregator.combined import CombinedRound, CombinerLimits, Shard
from fedhh_aggregator.rounds import RoundState

DIMENSION = 8


class Worker:
    """Answers GetResult with ``total`` at once."""

    def __init__(self, total: np.ndarray) -> None:
        self.total = total

    async def result(self, round_id: bytes, wait_s: float) -> Any:
        return SimpleNamespace(total=self.total, survivors=(1, 2, 3), signatures=(),
                               num_contributors=3)


def shard(j: int) -> Shard:
    soon = int(time.time() * 1000) + 600_000
    config = RoundConfig(round_id=f"r/1/1/s{j}".encode(), num_devices=4, dimension=DIMENSION,
                         modulus_bits=16, n_min=3, k=3, t=2, graph_seed=bytes([j]) * 32,
                         deadlines=StageDeadlines(*([soon] * 5)))
    return Shard(j, SignedConfig(config.to_bytes(), b""), config, worker=j)


def collected(*totals: np.ndarray) -> tuple[CombinedRound, list[int]]:
    """The round over workers answering ``totals``, and its total once every shard settled."""
    pool = [SimpleNamespace(control=Worker(total)) for total in totals]
    finished: list[CombinedRound] = []

    async def scenario() -> tuple[CombinedRound, list[int]]:
        combined = CombinedRound(b"r/1/1", [shard(j) for j in range(len(totals))],
                                 pool, CombinerLimits(), finished.append,  # type: ignore[arg-type]
                                 lambda _: None, lambda _: None)
        combined.start()
        await asyncio.wait_for(combined.finished.wait(), 20)
        total = [] if combined.total is None else combined.total.tolist()
        combined.stop()
        return combined, total

    return asyncio.run(scenario())


def honest() -> np.ndarray:
    return np.arange(DIMENSION, dtype=np.uint16)


@pytest.mark.parametrize(("lie", "fault"), [
    # Before: the round's task died on a shape error, unseen, and the round ran to its deadline.
    (np.arange(DIMENSION // 2, dtype=np.uint16), "4 entries, its shard's config has 8"),
    # Before: a one-entry sum was broadcast over the whole total and released.
    (np.array([5], dtype=np.uint16), "1 entries, its shard's config has 8"),
    (np.arange(DIMENSION, dtype=np.uint32), "taken modulo 2^32, its shard's config says 2^16"),
])
def test_a_sum_its_shard_config_rules_out_is_refused(lie: np.ndarray, fault: str) -> None:
    combined, total = collected(honest(), lie)
    good, liar = combined.shards
    assert (good.state, liar.state) == (RoundState.RELEASED, RoundState.ABORTED)
    assert liar.reason == f"the worker's sum is malformed: {fault}"
    assert liar.reached_unmask  # charged as a shard lost after unmasking
    assert combined.state == RoundState.RELEASED and combined.contributors == 3
    assert total == honest().tolist()


def test_honest_sums_add_up() -> None:
    combined, total = collected(honest(), honest())
    assert combined.state == RoundState.RELEASED and combined.contributors == 6
    assert total == (2 * honest().astype(np.int64)).tolist()
