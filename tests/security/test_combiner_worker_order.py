"""A combiner restarted with its --worker list in another order (or without a worker) finds
each journaled shard's worker by its control address, not by its position in the list. Before,
the journal kept the position alone: restarted with the list reordered, the combiner asked
another worker for each shard (GetOutcome's shard outcomes, a running round's collector), one
that never had it. A running round whose worker is no longer listed is refused at start,
naming the worker and the list."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aggregator_testkit import COORDINATOR_PUBLIC, combiner_journal, make_cohort

from fedhh.errors import ConfigError
from fedhh.rpc.control_client import RoundOutcome
from fedhh_aggregator.combiner import CombinerRegistry
from fedhh_aggregator.control import ShardedRoundControl
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.outcomes import OutcomeState
from fedhh_aggregator.workers import WorkerSpec

ROUND = b"run/1/combined"
SHARD = b"run/1/s0"


@dataclass
class _Control:
    asked: list[bytes] = field(default_factory=list)

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        self.asked.append(round_id)
        return RoundOutcome("released", reached_unmask=True, num_contributors=4)


@dataclass
class _Worker:
    index: int
    spec: WorkerSpec
    control: _Control = field(default_factory=_Control)


class _Pool:
    """A WorkerPool's face without channels: workers by position in --worker's list."""

    def __init__(self, *addresses: str) -> None:
        self.workers = [_Worker(i, WorkerSpec(a, a)) for i, a in enumerate(addresses)]

    def __len__(self) -> int:
        return len(self.workers)

    def __getitem__(self, index: int) -> _Worker:
        return self.workers[index]


def _journal(directory: Path, finished: bool) -> Path:
    """One round whose one shard ran on worker 0 of the list 'a:7100', 'b:7100'."""
    cohort = make_cohort(4, 16, 3, 2, n_min=3, consistency_check=True, round_id=SHARD)
    shard = {"config": cohort.signed.payload.hex(), "signature": cohort.signed.signature.hex(),
             "worker": 0, "address": "a:7100"}
    return combiner_journal(directory, ROUND, shard, finished)


def test_a_finished_rounds_shard_is_asked_of_its_own_worker_in_a_reordered_list(
        tmp_path: Path) -> None:
    _journal(tmp_path / "state", finished=True)
    pool = _Pool("b:7100", "a:7100")

    async def restore_and_ask() -> tuple[int, OutcomeState]:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, pool,  # type: ignore[arg-type]
                                    journal=Journal(tmp_path / "state"))
        try:
            combiner.restore()
            outcome = await ShardedRoundControl(combiner).outcome(ROUND)
        finally:
            combiner.close()
        return outcome.shards[0].worker, outcome.shards[0].state

    assert asyncio.run(restore_and_ask()) == (1, OutcomeState.RELEASED)
    assert pool[1].control.asked == [SHARD] and pool[0].control.asked == []


def test_a_running_round_whose_worker_is_no_longer_listed_is_refused_naming_it(
        tmp_path: Path) -> None:
    path = _journal(tmp_path / "state", finished=False)
    before = path.read_bytes()

    async def restore() -> None:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, _Pool("b:7100", "c:7100"),  # type: ignore[arg-type]
                                    journal=Journal(tmp_path / "state"))
        try:
            combiner.restore()
        finally:
            combiner.close()

    with pytest.raises(ConfigError, match=(
            "round 'run/1/combined' does not fit this combiner \\(shard 0 runs on the worker "
            "a:7100, which --worker no longer lists \\(b:7100, c:7100\\)\\)")):
        asyncio.run(restore())
    assert path.read_bytes() == before
