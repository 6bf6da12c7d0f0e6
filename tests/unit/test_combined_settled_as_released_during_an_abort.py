"""A sharded round taken over after its release (a combiner restart) whose collection failed
is being aborted, its running shard's cancel held at the worker, when the coordinator's cancel
(or its word that the total is stored) settles it as the released round it was
(``CombinedRound.settle_as_released``): the two interleaved either way, the round ends once,
said reached unmasking, and where the release wins it keeps the count it released with (the
count the coordinator was charged at, which is larger than the n_min an abort after unmasking
costs): the abort cut short never lands after it. Stand-in workers."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from fedhh.rpc.aggregator_client import RoundOutcome
from fedhh.secagg import RoundConfig, SignedConfig
from fedhh.secagg.config import StageDeadlines
from fedhh_aggregator.combined import CombinedRound, CombinerLimits, Shard
from fedhh_aggregator.rounds import RoundState

RELEASED_WITH = 8  # (two shards of 4: more than n_min, 3)


class Broken:
    """A worker whose read fails unexpectedly (a bug collecting its shard)."""

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        raise RuntimeError("a bug")

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        pass


class Held:
    """A worker running its shard (its read waits beyond the test) whose cancel waits on
    ``gate``; once cancelled it says the shard aborted."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.cancelling = asyncio.Event()
        self.cancelled = False

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        await asyncio.Event().wait()

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        self.cancelling.set()
        await self.gate.wait()
        self.cancelled = True

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        return RoundOutcome("aborted" if self.cancelled else "running", durable=True)


def shard(j: int) -> Shard:
    at = int((time.time() + 600) * 1000)
    config = RoundConfig(round_id=f"r/1/1/s{j}".encode(), num_devices=4, dimension=8,
                         modulus_bits=16, n_min=3, k=3, t=2, graph_seed=bytes([j]) * 32,
                         deadlines=StageDeadlines(*([at] * 5)))
    return Shard(j, SignedConfig(config.to_bytes(), b""), config, worker=j, opened=True)


@pytest.mark.parametrize("first", ["the release", "the abort"])
def test_a_release_and_an_abort_that_race_end_the_round_once_at_the_larger_charge(
        first: str) -> None:
    held = Held()
    finished: list[RoundState] = []

    async def go() -> tuple[CombinedRound, RoundState]:
        round_ = CombinedRound(b"r/1/1", [shard(0), shard(1)],
                               [SimpleNamespace(control=Broken()),  # type: ignore[list-item]
                                SimpleNamespace(control=held)],
                               CombinerLimits(), lambda _, state: finished.append(state),
                               lambda _: None, lambda _: None)
        round_.take_over_released(RELEASED_WITH, (0, 1), ())
        round_.start()
        try:
            await asyncio.wait_for(held.cancelling.wait(), 20)  # the abort is under way
            if first == "the abort":
                held.gate.set()
                await asyncio.wait_for(round_.finished.wait(), 20)
            state = await asyncio.wait_for(round_.cancel(), 20)
            held.gate.set()
            for _ in range(50):  # (what the abort cut short would still do)
                await asyncio.sleep(0)
        finally:
            round_.stop()
        return round_, state

    round_, state = asyncio.run(go())
    assert round_.reached_unmask  # (charged either way: never free)
    if first == "the release":
        assert (state, round_.state) == (RoundState.RELEASED, RoundState.RELEASED)
        assert round_.contributors == RELEASED_WITH
        assert finished == []  # (its outcome is journaled already; no abort lands after it)
    else:
        assert (state, round_.state) == (RoundState.ABORTED, RoundState.ABORTED)
        assert finished == [RoundState.ABORTED]
