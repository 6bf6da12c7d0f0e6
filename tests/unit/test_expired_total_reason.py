"""What a combiner says of a released total it forgot at its --result-ttl: one the coordinator
fetched (held for it, sent whole) and never said stored is not "expired before its outcome was
fetched", which it said of both before (the coordinator that read it, its 'delivered' lost,
was told it never had). An aggregator, which may be a combiner's worker, does not blame the
coordinator alone. Stand-in workers."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aggregator_testkit import COORDINATOR_PUBLIC
from test_combined_round import HoldingWorker, Workers, honest, opened, until

from fedhh.errors import StateError
from fedhh_aggregator.combined import CombinerLimits
from fedhh_aggregator.combiner import CombinerRegistry
from fedhh_aggregator.control import ResultReport, ShardedRoundControl
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.rounds import RoundState


@pytest.mark.parametrize("fetched,why", [
    (True, "its total was sent and never said stored by the coordinator within --result-ttl"),
    (False, "expired before its outcome was fetched"),
])
def test_a_total_forgotten_at_its_ttl_says_whether_it_was_sent(fetched: bool, why: str
                                                               ) -> None:
    async def go() -> str:
        combiner = CombinerRegistry(
            COORDINATOR_PUBLIC, Workers(HoldingWorker(honest()), HoldingWorker(honest())),  # type: ignore[arg-type]
            CombinerLimits(result_ttl_s=0.2))
        control = ShardedRoundControl(combiner)
        sent: list[ResultReport] = []

        async def send(report: ResultReport) -> None:
            sent.append(report)

        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(round_.finished.wait(), 20)
            if fetched:
                await control.get_result(b"r/1/1", 20, send, hold=True)
                assert sent[0].state == RoundState.RELEASED
            await asyncio.wait_for(until(lambda: len(combiner) == 0), 20)
            with pytest.raises(StateError) as gone:
                await control.get_result(b"r/1/1", 1, send, hold=True)
            return str(gone.value)
        finally:
            combiner.close()

    assert asyncio.run(go()).endswith(f"is gone: {why}")


def test_an_aggregator_that_may_be_a_workers_names_its_combiner_beside_the_coordinator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (on a worker it is the combiner that fetches the sum and says it stored; before, the
    # worker's reason said the coordinator never did)
    registry = RoundRegistry(COORDINATOR_PUBLIC)
    reasons: list[str] = []
    monkeypatch.setattr(registry, "forget", lambda round_, why, **_: reasons.append(why))
    registry._expired(SimpleNamespace(sent_held=True))  # type: ignore[arg-type]
    assert reasons == ["its sum was sent and never said stored by the coordinator (or, on a "
                       "worker, its combiner) within --result-ttl"]
