"""A combiner's answer to GetOutcome's long-poll (``ShardedRoundControl.watch``): it waits on one
long-poll per running shard at the shard's worker, each with what that worker last said, and
answers a change of the round's stage at once, a change of its per-stage counts alone (one
shard closed a stage the others still run) once ``COUNTS_COALESCE_S`` passed, with what more
came. A worker before the long-poll (its answers not ``watched``) is asked again at a pace and
still followed. Before, the combiner answered at once, asking every worker at every ask: the
coordinator's watch asked every second, and each second cost a call to each worker. Stand-in
workers and registry: no network."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from fedhh.rpc.control_client import OutcomeView, RoundOutcome
from fedhh.secagg import SignedConfig, Stage
from fedhh_aggregator import control as control_module
from fedhh_aggregator.combined import CombinedRound, Shard
from fedhh_aggregator.control import ShardedRoundControl
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome
from fedhh_aggregator.rounds import RoundState

ADVERTISING = RoundOutcome("running", stage=Stage.ADVERTISE_KEYS)


class Worker:
    """A worker's control for one shard: its word changes when the test ``move``s it; a
    long-poll (``seen``) waits for that, unless the worker is one before the long-poll
    (``watching`` False: answered at once, not ``watched``)."""

    def __init__(self, watching: bool = True) -> None:
        self.word = ADVERTISING
        self.watching = watching
        self.asks: list[OutcomeView | None] = []
        self.waiting = asyncio.Event()  # a long-poll waits here now
        self.asked = asyncio.Event()
        self._moved = asyncio.Event()

    async def outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                      wait_s: float = 0.0) -> RoundOutcome:
        self.asks.append(seen)
        self.asked.set()
        if seen is None or not self.watching:
            return self.word
        while OutcomeView.of(self.word) == seen:
            self._moved.clear()
            self.waiting.set()
            try:
                await asyncio.wait_for(self._moved.wait(), wait_s)
            except TimeoutError:
                break
            finally:
                self.waiting.clear()
        return dataclasses.replace(self.word, watched=True)

    def move(self, word: RoundOutcome) -> None:
        self.word = word
        self.waiting.clear()  # (until the next long-poll)
        self._moved.set()


class Round:
    """A combined round as the watch reads it: its shards, workers and finish."""

    live_outcome = CombinedRound.live_outcome
    live_outcomes = CombinedRound.live_outcomes

    def __init__(self, workers: list[Worker]) -> None:
        signed = SignedConfig(b"", b"")
        self.shards = [Shard(i, signed, SimpleNamespace(round_id=b"r/%d" % i), i)  # type: ignore[arg-type]
                       for i in range(len(workers))]
        self.pool = [SimpleNamespace(control=w) for w in workers]
        self.finished = asyncio.Event()
        self.state = RoundState.RUNNING

    def observe_unmask(self) -> None:
        pass


def _control(round_: Round) -> ShardedRoundControl:
    record = RecordedOutcome(OutcomeState.RUNNING, b"\1" * 32)
    registry = SimpleNamespace(
        durable=True, outcome=lambda round_id: (record, tuple(round_.shards)),
        pool=round_.pool, by_round=lambda round_id: round_,
        limits=SimpleNamespace(max_wait_s=1000.0))
    return ShardedRoundControl(registry)  # type: ignore[arg-type]


async def _polled(worker: Worker) -> None:
    """Until ``worker`` holds a long-poll of the combiner's."""
    await worker.waiting.wait()


SEEN = OutcomeView("running", Stage.ADVERTISE_KEYS)
ONE_CLOSED = RoundOutcome("running", stage=Stage.SHARE_KEYS,
                          stage_devices=((Stage.ADVERTISE_KEYS, 5),))
OTHER_CLOSED = RoundOutcome("running", stage=Stage.SHARE_KEYS,
                            stage_devices=((Stage.ADVERTISE_KEYS, 6),))


def test_a_count_only_change_waits_for_the_stage_change_that_follows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control_module, "COUNTS_COALESCE_S", 1000.0)

    async def go() -> tuple[Any, list[Worker]]:
        workers = [Worker(), Worker()]
        watch = asyncio.create_task(_control(Round(workers)).watch(b"r", SEEN, 1000))
        await asyncio.wait_for(asyncio.gather(*(_polled(w) for w in workers)), 30)
        workers[0].move(ONE_CLOSED)  # the round's stage is still worker 1's
        await asyncio.wait_for(_polled(workers[0]), 30)  # (asked again: nothing answered)
        assert not watch.done()
        workers[1].move(OTHER_CLOSED)
        return await asyncio.wait_for(watch, 30), workers

    answer, workers = asyncio.run(go())
    assert answer.stage == Stage.SHARE_KEYS
    assert answer.stage_devices == ((Stage.ADVERTISE_KEYS, 11),)
    # One plain ask each, then one long-poll per word of each worker.
    assert workers[0].asks == [None, SEEN, OutcomeView.of(ONE_CLOSED)]
    assert workers[1].asks == [None, SEEN]


def test_a_count_only_change_is_answered_once_the_coalescing_passed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control_module, "COUNTS_COALESCE_S", 0.05)

    async def go() -> tuple[Any, float]:
        workers = [Worker(), Worker()]
        loop = asyncio.get_running_loop()
        asked = loop.time()
        watch = asyncio.create_task(_control(Round(workers)).watch(b"r", SEEN, 1000))
        await asyncio.wait_for(asyncio.gather(*(_polled(w) for w in workers)), 30)
        workers[0].move(ONE_CLOSED)
        return await asyncio.wait_for(watch, 30), loop.time() - asked

    answer, took = asyncio.run(go())
    assert (answer.stage, answer.stage_devices) == (Stage.ADVERTISE_KEYS,
                                                     ((Stage.ADVERTISE_KEYS, 5),))
    assert took >= 0.05


def test_a_worker_before_the_long_poll_is_still_followed(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(control_module, "UNWATCHED_PACE_S", 0.01)

    async def go() -> tuple[Any, Worker]:
        worker = Worker(watching=False)
        watch = asyncio.create_task(_control(Round([worker])).watch(b"r", SEEN, 1000))
        while len(worker.asks) < 3:  # (asked at its pace, each answered at once)
            worker.asked.clear()
            await asyncio.wait_for(worker.asked.wait(), 30)
        assert not watch.done()
        worker.move(ONE_CLOSED)
        return await asyncio.wait_for(watch, 30), worker

    answer, worker = asyncio.run(go())
    assert answer.stage == Stage.SHARE_KEYS
    assert worker.asks[1:] == [SEEN] * (len(worker.asks) - 1)


def test_a_round_that_no_longer_runs_is_answered_at_once() -> None:
    async def go() -> Any:
        worker = Worker()
        round_ = Round([worker])
        control = _control(round_)
        record = RecordedOutcome(OutcomeState.ABORTED, b"\1" * 32, abort_reason="x")
        control.rounds.outcome = lambda round_id: (record, tuple(round_.shards))  # type: ignore[method-assign]
        return await asyncio.wait_for(control.watch(b"r", SEEN, 1000), 30)

    assert asyncio.run(go()).state == OutcomeState.ABORTED
