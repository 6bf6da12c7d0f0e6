"""A combiner whose worker refuses a shard's call with an answer no later try changes (its
control token, a call it does not serve, an answer that breaks the wire contract: not
``control_client.passing``) settles the shard at once: a refused read has the shard cancelled
and settled by the worker's word; a refused cancel (the shard past its deadline) is settled by
the word too, and a shard the worker says still runs, its cancel not taken, counts as reached
unmasking (charged at n_min by the coordinator), as it does when the coordinator's cancel of
the round finds the worker refusing. Before, the refused call was tried again until the
shard's deadline and --patience-seconds had passed, and a round cancel whose shard cancel was
refused took the worker's "running" for a shard that never would unmask. Stand-in workers."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from fedhh.errors import AuthenticationError
from fedhh.rpc.aggregator_client import RoundOutcome
from fedhh.rpc.control_client import AggregatorError
from fedhh.secagg import RoundConfig, SignedConfig
from fedhh.secagg.config import StageDeadlines
from fedhh_aggregator.combined import CombinedRound, CombinerLimits, Shard
from fedhh_aggregator.rounds import RoundState

REFUSALS = [
    AuthenticationError("aggregator: missing or invalid control token"),
    grpc.aio.AioRpcError(grpc.StatusCode.UNIMPLEMENTED, grpc.aio.Metadata(),
                         grpc.aio.Metadata(), "an older worker"),
    AggregatorError("unexpected result header (state 0)")]


class RefusingWorker:
    """A worker running its shard (a read waits beyond the test) that refuses the read
    (``read_refused``) or the cancel (``cancel_refused``) with ``refusal``; once cancelled it
    says the shard ended before unmasking, else that it runs (or ``word``)."""

    def __init__(self, refusal: Exception, *, read_refused: bool = False,
                 cancel_refused: bool = False, word: RoundOutcome | None = None) -> None:
        self.refusal, self.word = refusal, word
        self.read_refused, self.cancel_refused = read_refused, cancel_refused
        self.reads = self.cancels = self.outcomes = 0
        self.cancelled = False
        self.reading = asyncio.Event()

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        self.reads += 1
        if self.read_refused:
            raise self.refusal
        self.reading.set()
        await asyncio.Event().wait()

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        self.cancels += 1
        if self.cancel_refused:
            raise self.refusal
        self.cancelled = True

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        self.outcomes += 1
        if self.cancelled:
            return RoundOutcome("aborted", abort_reason="cancelled by the combiner",
                                durable=True)
        return self.word or RoundOutcome("running", durable=True)


def one_shard(deadline_s: float) -> Shard:
    """A shard whose stage deadlines are ``deadline_s`` from now (negative: passed)."""
    at = int((time.time() + deadline_s) * 1000)
    config = RoundConfig(round_id=b"r/1/1/s0", num_devices=4, dimension=8, modulus_bits=16,
                         n_min=3, k=3, t=2, graph_seed=bytes(32),
                         deadlines=StageDeadlines(*([at] * 5)))
    return Shard(0, SignedConfig(config.to_bytes(), b""), config, worker=0, opened=True)


def settled(worker: RefusingWorker, deadline_s: float, cancel_round: bool = False
            ) -> CombinedRound:
    """The one-shard round at ``worker`` once it settled (``cancel_round``: cancelled by the
    coordinator once the worker is read); slack 1 s and a patience of an hour past it."""
    async def go() -> CombinedRound:
        round_ = CombinedRound(b"r/1/1", [one_shard(deadline_s)],
                               [SimpleNamespace(control=worker)],  # type: ignore[list-item]
                               CombinerLimits(slack_s=1.0, patience_s=3600.0),
                               lambda *_: None, lambda _: None, lambda _: None)
        round_.start()
        try:
            if cancel_round:
                await asyncio.wait_for(worker.reading.wait(), 20)
                await asyncio.wait_for(round_.cancel(), 20)
            await asyncio.wait_for(round_.finished.wait(), 20)  # (before: an hour)
        finally:
            round_.stop()
        return round_

    return asyncio.run(go())


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_refused_read_has_the_shard_cancelled_and_settled_by_the_workers_word(
        refusal: Exception) -> None:
    worker = RefusingWorker(refusal, read_refused=True)
    round_ = settled(worker, 600.0)
    assert round_.state == RoundState.ABORTED and not round_.reached_unmask
    assert (worker.reads, worker.cancels, worker.outcomes) == (1, 1, 1)


@pytest.mark.parametrize("refusal", REFUSALS)
@pytest.mark.parametrize("ended", [False, True])
def test_a_refused_cancel_at_the_deadline_is_settled_at_once_by_the_workers_word(
        refusal: Exception, ended: bool) -> None:
    """Past the shard's deadline its cancel is refused: asked once. A worker that says the
    shard ended before unmasking leaves it free; one that says it still runs leaves it
    reached unmasking, its cancel not taken."""
    word = RoundOutcome("aborted", abort_reason="past its deadline", durable=True) \
        if ended else None
    worker = RefusingWorker(refusal, cancel_refused=True, word=word)
    round_ = settled(worker, -10.0)
    assert round_.state == RoundState.ABORTED and round_.reached_unmask is not ended
    assert (worker.cancels, worker.outcomes) == (1, 1)
    if not ended:
        assert "its cancel not taken" in round_.shards[0].reason


def test_a_round_cancelled_whose_shard_cancel_is_refused_counts_it_reached_if_it_runs(
) -> None:
    worker = RefusingWorker(REFUSALS[1], cancel_refused=True)
    round_ = settled(worker, 600.0, cancel_round=True)
    assert round_.state == RoundState.ABORTED
    assert round_.reached_unmask  # (before: free, though the worker still ran the shard)
    assert (worker.cancels, worker.outcomes) == (1, 1)
