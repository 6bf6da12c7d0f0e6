"""A combiner's word to a worker that holds a shard sum nobody will read (the total dropped
unfetched, the round aborted) is tried again while the worker cannot be reached, as the
coordinator's word to the combiner is. Before, one try: a worker restarting as it was told
held the sum until its --result-ttl. Stand-in workers, a real journal."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from test_combined_round import HoldingWorker, honest, journaled, opened, until

from fedhh.backoff import Backoff
from fedhh.errors import NotFoundError, StateError
from fedhh.rpc.control_client import patiently
from fedhh_aggregator import combined
from fedhh_aggregator.control import ShardedRoundControl
from fedhh_aggregator.rounds import RoundState


class RestartingWorker(HoldingWorker):
    """A holding worker whose first ``away`` CancelRounds find it unreachable (``code``)."""

    def __init__(self, total: np.ndarray, away: int, code: grpc.StatusCode) -> None:
        super().__init__(total)
        self.away, self.code, self.asked = away, code, 0

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        self.asked += 1
        if self.asked <= self.away:
            raise grpc.aio.AioRpcError(self.code, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       "the worker is restarting")
        await super().cancel(round_id, delivered)


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(combined, "DROP_RETRY_S", 0.001)
    monkeypatch.setattr(combined, "DROP_RETRY_MAX_S", 0.01)


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED])
def test_a_total_dropped_unfetched_is_told_to_a_worker_once_it_answers(
        tmp_path: Path, code: grpc.StatusCode) -> None:
    steady, restarting = HoldingWorker(honest()), RestartingWorker(2 * honest(), 2, code)

    async def released_then_cancelled() -> None:
        combiner = journaled(tmp_path, steady, restarting)
        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(round_.finished.wait(), 20)
            assert await ShardedRoundControl(combiner).cancel(b"r/1/1") == RoundState.RELEASED
            await asyncio.wait_for(until(lambda: bool(steady.told and restarting.told)), 20)
        finally:
            combiner.close()

    asyncio.run(released_then_cancelled())
    assert (steady.told, restarting.told) == (["dropped"], ["dropped"])
    assert restarting.asked == 3  # two tries found it away (before: the one try, never told)


@pytest.mark.parametrize(("error", "told"), [
    (grpc.aio.AioRpcError(grpc.StatusCode.UNIMPLEMENTED, grpc.aio.Metadata(),
                          grpc.aio.Metadata(), "an older worker"), False),
    (StateError("aggregator: refused"), False),
    (NotFoundError("aggregator: unknown round"), True)])
def test_an_answer_no_later_try_changes_ends_the_tries(error: Exception, told: bool) -> None:
    # (a refusal is kept by the worker to its --result-ttl; NOT_FOUND: it holds nothing now)
    calls: list[int] = []

    async def cancel() -> None:
        calls.append(1)
        raise error

    ended = asyncio.run(patiently(cancel, 600.0, Backoff(0.001, 0.01)))
    assert calls == [1] and (ended is None) == told


@pytest.mark.parametrize("sum_sent", ["honest", "malformed"])
def test_a_combiner_stopped_while_a_worker_is_away_stops_telling_it(
        tmp_path: Path, sum_sent: str) -> None:
    """A worker stays away while the combiner retries its word on a shard sum nobody will
    read: the total dropped unfetched (an honest sum), or at once (a malformed one, refused).
    The combiner is stopped (its channels closed next): its retries end with the stop, none
    outlives it. Before, they ran on for its --result-ttl (600 s), past the stop, into the
    closed channels (a UsageError, logged as a task's exception never retrieved)."""
    away = RestartingWorker(2 * honest() if sum_sent == "honest"
                            else np.arange(4, dtype=np.uint16), 10**9,
                            grpc.StatusCode.UNAVAILABLE)

    async def stopped_while_telling() -> list[asyncio.Task[Any]]:
        combiner = journaled(tmp_path, HoldingWorker(honest()), away)
        round_ = await opened(combiner)
        await asyncio.wait_for(round_.finished.wait(), 20)
        if sum_sent == "honest":
            assert await ShardedRoundControl(combiner).cancel(b"r/1/1") == RoundState.RELEASED
        await asyncio.wait_for(until(lambda: away.asked >= 2), 20)
        combiner.close()
        others = asyncio.all_tasks() - {asyncio.current_task()}
        await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), 20)
        return list(others)

    ended = asyncio.run(stopped_while_telling())
    telling = "shards of r/1/1" if sum_sent == "honest" else "drop shard sums of r/1/1"
    assert telling in [t.get_name() for t in ended if t.cancelled()]
    assert not [t for t in ended if not t.cancelled() and t.exception() is not None]
    assert away.told == []
