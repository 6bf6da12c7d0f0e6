"""An attempt a store outage interrupted before it reached the aggregator is tried again as it
stands, not counted against ``max_attempts``; the attempts that ran count as before.

Before, the runner settled each such attempt aborted ("the store was unavailable; the round
never reached the aggregator") and counted it: a database flapping through one round failed
the run, "released nothing in 5 attempts", though nothing was charged or sent to a device."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from single_aggregator_kit import SingleAggregator

from fedhh.config import RunConfig
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

# No device checks in: each attempt that runs aborts for too few at its 10 ms check-in.
# (eps_local given: no solve at the run's creation.)
CONFIG = RunConfig(eps_agg=1e6, delta=1e-6, eps_local=4.0, rounds=1, max_bits=10,
                   dim_limit=1 << 10, codec="5bit", target_devices=8, min_devices=5,
                   checkin_ms=10, max_attempts=3, expected_dropout=0.0, corrupt_fraction=0.0)
OUTAGES = 5  # more than max_attempts


class FlappingStore(Store):
    """A store lost as each of its first ``OUTAGES`` check-ins ends: the attempt's abort is
    not written (what the abort of an interrupted attempt writes, once it answers, is)."""

    outages = 0

    def abort_round(self, run_id: str, round_: int, attempt: int, reason: str) -> None:
        if self.outages < OUTAGES and reason.startswith("only 0 devices checked in"):
            self.outages += 1
            raise StoreUnavailable("the database is unavailable (a test's outage)")
        super().abort_round(run_id, round_, attempt, reason)


def test_a_flapping_store_spends_no_attempt_that_never_reached_the_aggregator(
        tmp_path: Path) -> None:
    store = FlappingStore(tmp_path / "c.sqlite")
    runner = Runner(store, SingleAggregator(), Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                    DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                    LifetimeBudget(eps=1e9, delta=0.5))
    runner.retry_delay_s = 0.001  # (the pause after an abort, and the outage's first poll)

    async def go() -> None:
        await create_run(store, CONFIG, "r")
        serving = asyncio.create_task(runner.serve())
        try:
            while store.run("r").state in ("pending", "running"):
                await asyncio.sleep(0.001)  # (a readiness wait: the run ended)
        finally:
            serving.cancel()

    asyncio.run(go())
    assert store.outages == OUTAGES
    run = store.run("r")
    rounds = [(r.attempt, r.state, r.reason) for r in store.rounds("r")]
    # Three attempts ran their check-in, and the run failed for them, not for the outages.
    assert [(a, s) for a, s, _ in rounds] == [(1, "aborted"), (2, "aborted"), (3, "aborted")]
    assert all(reason.startswith("only 0 devices checked in") for _, _, reason in rounds), rounds
    assert run.state == "failed"
    assert "released nothing in 3 attempts (the last: only 0 devices" in run.error, run.error
