"""A run cancelled during the pause after an aborted attempt (``Runner.retry_delay_s``) ends
cancelled at once, not once the pause has run out. b8f6a2e made such a cancel open no attempt
more, but the run still waited out the pause (1 s by default, whatever the runner is given)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from single_aggregator_kit import SingleAggregator

from fedhh.config import RunConfig
from fedhh.rounds import RunCancelled
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

# No device checks in: each attempt aborts for too few at its 10 ms check-in. (eps_local
# given: no solve at the run's creation.)
CONFIG = RunConfig(eps_agg=1e6, delta=1e-6, eps_local=4.0, rounds=1, max_bits=10,
                   dim_limit=1 << 10, codec="5bit", target_devices=8, min_devices=5,
                   checkin_ms=10, max_attempts=3, expected_dropout=0.0, corrupt_fraction=0.0)


def test_a_cancel_during_the_pause_after_an_abort_ends_the_run_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    runner = Runner(store, SingleAggregator(), Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                    DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                    LifetimeBudget(eps=1e9, delta=0.5))
    runner.retry_delay_s = 3600.0  # (the run could end by the pause running out in no test)

    async def go() -> None:
        await create_run(store, CONFIG, "r")
        driving = asyncio.create_task(runner.drive("r"))
        while not store.rounds("r") or store.rounds("r")[0].state != "aborted":
            await asyncio.sleep(0.001)  # (a readiness wait: the first attempt aborted)
        runner.cancel("r")
        # (30 s only bounds a failure: the run ends as soon as the cancel is asked)
        await asyncio.wait_for(driving, 30)

    with pytest.raises(RunCancelled, match="cancelled by the operator"):
        asyncio.run(go())
    assert [(r.attempt, r.state) for r in store.rounds("r")] == [(1, "aborted")]
    assert "only 0 devices checked in" in store.rounds("r")[0].reason
