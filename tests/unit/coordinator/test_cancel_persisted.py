"""An operator's cancel of a running run outlives a coordinator restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh.rounds import RunCancelled
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import CANCEL_ASKED, Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


def _runner(store: Store) -> Runner:
    """A coordinator's runner; the run under test never reaches its aggregator."""
    return Runner(store, None, Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                  DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                  LifetimeBudget(eps=1e9, delta=0.5))


def test_a_cancelled_running_run_stays_cancelled_after_a_restart(tmp_path: Path) -> None:
    """`fedhh admin cancel t` answered "running" (a running run stops between rounds); the
    coordinator was stopped before the round ended, and on restart run t ran again: the
    cancel lived in the old process's memory alone."""
    store = Store(tmp_path / "coordinator.sqlite")
    config = RunConfig(eps_agg=4.0, delta=1e-6, rounds=4, target_devices=400,
                       min_devices=300)

    async def go() -> None:
        await create_run(store, config, "t")
        store.set_run_state("t", "running")
        _runner(store).cancel("t")  # the first process, stopped before the round ended
        assert (store.run("t").state, store.run("t").error) == ("running", CANCEL_ASKED)
        with pytest.raises(RunCancelled):
            await asyncio.wait_for(_runner(store).drive("t"), 30)  # the restarted one

    asyncio.run(go())


def test_a_run_that_ended_meanwhile_is_not_marked(tmp_path: Path) -> None:
    store = Store(tmp_path / "coordinator.sqlite")

    async def go() -> None:
        await create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                          min_devices=300), "d")

    asyncio.run(go())
    store.set_run_state("d", "done")
    assert not store.ask_cancel("d", CANCEL_ASKED)
    assert (store.run("d").state, store.run("d").error) == ("done", "")
