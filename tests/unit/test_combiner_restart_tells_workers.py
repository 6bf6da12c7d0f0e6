"""A combiner stopped after it journaled a total delivered (or dropped) and before its word
reached the workers: the restarted combiner tells them, so they drop the shard sums they held
for it. Before, the restart only kept the round's record, and the workers held their sums
until their own --result-ttl (600 s by default). So does a restart that finds a released total
it can no longer take over (lost), and one that takes a total over without the shards given up
on before its release. Stand-in workers, a real journal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aggregator_testkit import COORDINATOR_PUBLIC
from test_combined_round import (
    GivenUpWorker,
    HoldingWorker,
    Workers,
    honest,
    journaled,
    opened,
    released_then_stopped,
    result_after_restart,
    settled,
    until,
)

from fedhh_aggregator.combiner import CombinerRegistry
from fedhh_aggregator.control import ResultReport, ShardedRoundControl
from fedhh_aggregator.journal import FILE_NAME, Journal
from fedhh_aggregator.rounds import RoundState


class StalledWorker(HoldingWorker):
    """A held shard sum whose CancelRound never arrives while ``stalled`` (the combiner is
    killed as it sends it); ``asked`` counts those sent."""

    def __init__(self, total: object) -> None:
        super().__init__(total)  # type: ignore[arg-type]
        self.stalled = True
        self.asked = 0

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        self.asked += 1
        if self.stalled:
            await asyncio.Event().wait()
        await super().cancel(round_id, delivered)


def without_released_shards(state: Path) -> None:
    """The journal in ``state`` as one written before finish lines listed their shards."""
    path = state / FILE_NAME
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    for entry in entries:
        entry.pop("shards", None)
        entry.pop("lost", None)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


@pytest.mark.parametrize(("delivered", "listed"), [(True, True), (False, True), (True, False)])
def test_a_restart_tells_the_workers_what_the_journal_says_of_the_total(
        tmp_path: Path, delivered: bool, listed: bool) -> None:
    # (not ``listed``: a line that cannot say which shards made the delivered total, so none
    # is told delivered. Before, each was, also one given up on whose sum never was.)
    first, second = StalledWorker(honest()), StalledWorker(2 * honest())

    async def killed_as_it_tells() -> None:
        combiner = journaled(tmp_path, first, second)
        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(round_.finished.wait(), 20)
            control = ShardedRoundControl(combiner)
            if delivered:
                sent: list[ResultReport] = []

                async def send(report: ResultReport) -> None:
                    sent.append(report)

                await control.get_result(b"r/1/1", 20, send, hold=True)
                assert sent[0].state == RoundState.RELEASED
            assert await control.cancel(b"r/1/1", delivered=delivered) == RoundState.RELEASED
            await settled(combiner)  # (its journal line written)
            await asyncio.wait_for(until(lambda: first.asked and second.asked), 20)
        finally:
            combiner.close()

    async def restarted() -> int:
        first.stalled = second.stalled = False
        combiner = journaled(tmp_path, first, second)
        try:
            await asyncio.wait_for(until(lambda: bool(first.told and second.told)), 20)
            return len(combiner)
        finally:
            combiner.close()

    asyncio.run(killed_as_it_tells())
    assert (first.told, second.told) == ([], [])
    if not listed:
        without_released_shards(tmp_path)
    assert asyncio.run(restarted()) == 0  # (not taken over: its record says it ended)
    word = "delivered" if delivered and listed else "dropped"
    assert (first.told, second.told) == ([word], [word])


def test_a_released_total_a_restart_cannot_take_over_has_its_shard_sums_dropped(
        tmp_path: Path) -> None:
    # The combiner released the total and stopped; it restarts with another coordinator key,
    # so the round's record no longer fits and the total is lost. Before, its workers were not
    # told, and held their sums until their --result-ttl.
    first, second = HoldingWorker(honest()), HoldingWorker(2 * honest())
    asyncio.run(released_then_stopped(tmp_path, first, second))

    async def restarted() -> int:
        combiner = CombinerRegistry(b"\x01" * len(COORDINATOR_PUBLIC),
                                    Workers(first, second),  # type: ignore[arg-type]
                                    journal=Journal(tmp_path))
        combiner.restore()
        try:
            await asyncio.wait_for(until(lambda: bool(first.told and second.told)), 10)
            return len(combiner)
        finally:
            combiner.close()

    assert asyncio.run(restarted()) == 0
    assert (first.told, second.told) == (["dropped"], ["dropped"])


def test_a_shard_given_up_on_before_the_release_is_told_to_drop_its_sum_at_a_takeover(
        tmp_path: Path) -> None:
    # Worker 1 was given up on (unreachable) while its shard released; the total was made of
    # worker 0's sum alone. The restarted combiner rebuilds that total from worker 0 alone and
    # tells worker 1 to drop the sum it still holds. Before, nobody told it: held until its
    # --result-ttl.
    first, second = HoldingWorker(honest()), GivenUpWorker(2 * honest())
    asyncio.run(released_then_stopped(tmp_path, first, second))
    second.given_up = False  # (it answers again)
    round_, (report,) = asyncio.run(result_after_restart(tmp_path, first, second))
    assert report.state == RoundState.RELEASED and round_.contributors == 3
    assert (first.told, second.told) == ([], ["dropped"])
