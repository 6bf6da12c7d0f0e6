"""CancelRun of a run the runner starts as the call reads it.

CancelRun once read the run's row in a worker thread (its deny list makes it large) before it
decided, and the runner, on the event loop, could open the run's first round meanwhile. The call
went by the row it had read: "pending", so it marked the run cancelled while the runner drove it
on (each round charged), the runner never told, and the run ended "done" over the cancel. It
now goes by the run's state alone, read on the loop with nothing awaited before it acts on it:
a run the runner started up to that read is cancelled through the runner.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from admin_service_kit import METADATA, admin_stub
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import CANCEL_ASKED, Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

CONFIG = RunConfig(eps_agg=4.0, delta=1e-6, rounds=4, target_devices=400, min_devices=300)


def test_a_run_started_as_its_cancel_reads_it_is_cancelled_through_the_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "c.sqlite")
    runner = Runner(store, None, Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                    DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                    LifetimeBudget(eps=1e9, delta=0.5))
    read = Store.run_state
    started: list[str] = []

    def read_as_the_runner_starts_it(self: Store, run_id: str) -> str:
        if not started:  # the runner opens the first round as the state is read
            started.append(run_id)
            self.open_round(run_id, 1)
        return read(self, run_id)

    async def go() -> Any:
        await create_run(store, CONFIG, "p")
        monkeypatch.setattr(Store, "run_state", read_as_the_runner_starts_it)
        async with admin_stub(store, runner) as stub:
            return await stub.CancelRun(pb.CancelRunRequest(run_id="p"), metadata=METADATA,
                                        timeout=30)

    answer = asyncio.run(go())
    assert started == ["p"]
    # the runner was asked to stop it (as for a running run), and the run is its to end
    row = store.run("p")
    assert (row.state, row.error) == ("running", CANCEL_ASKED)
    assert answer.state == "running"
