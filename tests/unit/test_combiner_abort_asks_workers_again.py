"""A combiner aborting a sharded round (the coordinator's cancel past its deadline) cancels each
running shard at its worker and asks the worker what became of it, both tried again while the
worker is busy or restarting, for up to the combiner's --patience-seconds (one patience for the
two); an answer no later try changes is taken at once. A second cancel while the abort waits
(the coordinator asks again past its call's deadline) waits for the same abort. Before, each
word was asked once: a worker busy at that moment left its shard charged at n_min, though its
word would have said the shard never reached unmasking; and a second cancel ran a second abort
beside the first. Stand-in workers, a real journal."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from aggregator_testkit import COORDINATOR_PUBLIC
from test_combined_round import Workers, opened, until

from fedhh.errors import StateError
from fedhh.rpc.aggregator_client import RoundOutcome
from fedhh.rpc.control_client import AggregatorBusy
from fedhh_aggregator import combined
from fedhh_aggregator.combined import CombinerLimits
from fedhh_aggregator.combiner import CombinerRegistry
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.rounds import RoundState

ROUND = b"r/1/1"


class BusyWorker:
    """A worker running its shard (GetResult waits beyond the test) that answers its first
    ``busy`` CancelRounds and GetOutcomes RESOURCE_EXHAUSTED (or raises ``refusal`` at every
    GetOutcome); once cancelled, it says the shard aborted before unmasking. ``gate`` (if
    set) is awaited by each CancelRound first."""

    def __init__(self, busy: int, refusal: Exception | None = None) -> None:
        self.busy, self.refusal = busy, refusal
        self.cancels = self.outcomes = 0
        self.cancelled = False
        self.gate: asyncio.Event | None = None

    async def open_round(self, signed: Any) -> None:
        pass

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        await asyncio.Event().wait()

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        self.cancels += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.cancels <= self.busy:
            raise AggregatorBusy("aggregator: too many calls")
        self.cancelled = True

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        self.outcomes += 1
        if self.refusal is not None:
            raise self.refusal
        if self.outcomes <= self.busy:
            raise AggregatorBusy("aggregator: too many calls")
        if self.cancelled:
            return RoundOutcome("aborted", abort_reason="cancelled by the combiner",
                                durable=True)
        return RoundOutcome("running", durable=True)


class Clocks:
    """The combiner's wall clock (``time.time`` in ``combined``) and its event loop's (which
    ``persevere`` reads), both moved on by :meth:`skip`: a patience runs out when the test
    says, not when a loaded machine's stall makes it (a 0.2 s patience met that way left the
    worker asked once)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ahead = 0.0
        monkeypatch.setattr(combined, "time",
                            SimpleNamespace(time=lambda: time.time() + self.ahead))

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        real = loop.time
        loop.time = lambda: real() + self.ahead  # type: ignore[method-assign]

    def skip(self, seconds: float) -> None:
        self.ahead += seconds


class StaysBusy(BusyWorker):
    """A worker busy for good whose ``at``-th CancelRound comes once ``clocks`` have passed
    ``skip_s``."""

    def __init__(self, clocks: Clocks, at: int, skip_s: float) -> None:
        super().__init__(10**9)
        self.clocks, self.at, self.skip_s = clocks, at, skip_s

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        if self.cancels + 1 == self.at:
            self.clocks.skip(self.skip_s)
        await super().cancel(round_id, delivered)


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(combined, "DROP_RETRY_S", 0.001)
    monkeypatch.setattr(combined, "DROP_RETRY_MAX_S", 0.01)


def cancelled(tmp_path: Path, worker: BusyWorker, patience_s: float = 600.0,
              clocks: Clocks | None = None) -> tuple[RoundState, bool]:
    """The round over two shards, both running (at ``worker`` and at one that answers at
    once), cancelled: its state, and whether it is said to have reached unmasking (the
    coordinator's charge at n_min; free otherwise). ``clocks``: the combiner's, if not the
    machine's."""
    async def go() -> tuple[RoundState, bool]:
        if clocks is not None:
            clocks.install(asyncio.get_running_loop())
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(BusyWorker(0), worker),  # type: ignore[arg-type]
                                    CombinerLimits(patience_s=patience_s), Journal(tmp_path))
        combiner.restore()
        try:
            round_ = await opened(combiner)
            state = await asyncio.wait_for(combiner.cancel(ROUND), 20)
            return state, round_.reached_unmask
        finally:
            combiner.close()

    return asyncio.run(go())


@pytest.mark.parametrize("busy", [1, 3])
def test_a_shard_whose_worker_is_busy_is_settled_by_its_word_once_it_answers(
        tmp_path: Path, busy: int) -> None:
    worker = BusyWorker(busy)
    assert cancelled(tmp_path, worker) == (RoundState.ABORTED, False)
    # (before: one cancel, one GetOutcome, both busy, and the shard charged at n_min)
    assert (worker.cancels, worker.outcomes) == (busy + 1, busy + 1)


def test_a_worker_busy_past_the_patience_leaves_its_shard_charged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The patience runs out at the worker's third cancel: the cancel is not tried again, and
    the word is asked once (``persevere`` makes a first try even past its give-up time).
    Nobody can say the shard did not reach unmasking: charged at n_min, as before."""
    clocks = Clocks(monkeypatch)
    worker = StaysBusy(clocks, at=3, skip_s=10.0)
    assert cancelled(tmp_path, worker, patience_s=10.0, clocks=clocks) == \
        (RoundState.ABORTED, True)
    assert (worker.cancels, worker.outcomes) == (3, 1) and not worker.cancelled


@pytest.mark.parametrize("refusal", [
    StateError("aggregator: refused"),
    grpc.aio.AioRpcError(grpc.StatusCode.UNIMPLEMENTED, grpc.aio.Metadata(),
                         grpc.aio.Metadata(), "an older worker")])
def test_a_word_no_later_try_changes_is_asked_once(tmp_path: Path,
                                                     refusal: Exception) -> None:
    worker = BusyWorker(0, refusal)
    assert cancelled(tmp_path, worker) == (RoundState.ABORTED, True)
    assert worker.outcomes == 1


def test_a_second_cancel_while_the_abort_waits_joins_it(tmp_path: Path) -> None:
    """The coordinator's cancel passes its call's deadline while a worker holds the combiner's
    cancel, and is asked again: the second waits for the abort under way. Before, it ran a
    second abort beside the first, which cancelled the shard and asked its word again."""
    worker = BusyWorker(0)
    worker.gate = asyncio.Event()

    async def go() -> tuple[RoundState, RoundState]:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(BusyWorker(0), worker),  # type: ignore[arg-type]
                                    journal=Journal(tmp_path))
        combiner.restore()
        try:
            round_ = await opened(combiner)
            first = asyncio.create_task(combiner.cancel(ROUND))
            await asyncio.wait_for(until(lambda: worker.cancels == 1), 20)
            first.cancel()  # (the first call's handler, past its deadline)
            second = asyncio.create_task(combiner.cancel(ROUND))
            for _ in range(20):
                await asyncio.sleep(0)
            assert worker.gate is not None
            worker.gate.set()
            return (await asyncio.wait_for(second, 20), round_.state)
        finally:
            combiner.close()

    assert asyncio.run(go()) == (RoundState.ABORTED, RoundState.ABORTED)
    assert (worker.cancels, worker.outcomes) == (1, 1)  # (before: 2, 2)
