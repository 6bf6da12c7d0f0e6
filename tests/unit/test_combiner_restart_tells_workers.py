"""A combiner stopped after it journaled a total delivered (or dropped) and before its word
reached the workers: the restarted combiner tells them, so they drop the shard sums they held
for it. Before, the restart only kept the round's record, and the workers held their sums
until their own --result-ttl (600 s by default). Stand-in workers, a real journal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_combined_round import (
    HoldingWorker,
    honest,
    journaled,
    opened,
    settled,
    until,
)

from fedhh_aggregator.control import ResultReport, ShardedRoundControl
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


@pytest.mark.parametrize("delivered", [True, False])
def test_a_restart_tells_the_workers_what_the_journal_says_of_the_total(
        tmp_path: Path, delivered: bool) -> None:
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
    assert asyncio.run(restarted()) == 0  # (not taken over: its record says it ended)
    word = "delivered" if delivered else "dropped"
    assert (first.told, second.told) == ([word], [word])
