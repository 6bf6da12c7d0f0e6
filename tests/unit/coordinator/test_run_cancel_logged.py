"""The coordinator logs a cancelled run: who asked (the admin API's caller), and when the run
ends, the round it stopped at and who asked. Before, CancelRun changed the store alone and the
log said nothing, of a pending run or a running one."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from admin_service_kit import METADATA, admin_stub
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

CONFIG = RunConfig(eps_agg=4.0, delta=1e-6, rounds=4, target_devices=400, min_devices=300)


def _runner(store: Store) -> Runner:
    """A coordinator's runner; the run under test never reaches its aggregator."""
    return Runner(store, None, Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                  DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                  LifetimeBudget(eps=1e9, delta=0.5))


def _said(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(message)]


def test_a_pending_run_cancelled_is_logged_with_who_asked(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = Store(tmp_path / "c.sqlite")

    async def go() -> None:
        await create_run(store, CONFIG, "p")
        async with admin_stub(store) as stub:
            await stub.CancelRun(pb.CancelRunRequest(run_id="p"), metadata=METADATA, timeout=30)

    with caplog.at_level(logging.INFO, logger="fedhh_coordinator"):
        asyncio.run(go())
    (record,) = _said(caplog, "run cancelled")
    assert record.run_id == "p" and record.round is None  # type: ignore[attr-defined]
    assert record.by.startswith("the admin API's caller at ipv4:127.0.0.1:")  # type: ignore[attr-defined]
    assert store.run("p").state == "cancelled"


def test_a_running_run_cancelled_is_logged_when_asked_and_when_it_ends(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = Store(tmp_path / "c.sqlite")
    runner = _runner(store)

    async def go() -> None:
        await create_run(store, CONFIG, "t")
        store.set_run_state("t", "running")
        async with admin_stub(store, runner) as stub:
            await stub.CancelRun(pb.CancelRunRequest(run_id="t"), metadata=METADATA, timeout=30)
        serving = asyncio.create_task(runner._serve_one())
        try:
            async def ended() -> None:
                while store.run("t").state != "cancelled":  # (a readiness wait)
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(ended(), 30)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    with caplog.at_level(logging.INFO, logger="fedhh_coordinator"):
        asyncio.run(go())
    (asked,) = _said(caplog, "run cancel asked")
    (ended,) = _said(caplog, "run cancelled")
    assert asked.run_id == ended.run_id == "t"  # type: ignore[attr-defined]
    assert asked.by == ended.by  # type: ignore[attr-defined]
    assert ended.by.startswith("the admin API's caller at ipv4:127.0.0.1:")  # type: ignore[attr-defined]
    assert (ended.round, ended.attempt) == (None, None)  # type: ignore[attr-defined]  # (none ran)
