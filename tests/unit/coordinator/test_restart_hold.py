"""A restarted coordinator holds its first check-in for the cohort the stopped one drew, as
read back from the store (``Runner._expect_last_cohort``, ``Lobby.expect``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.plans import stored_cohort
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store, stored_members_field


class _SingleAggregator:
    """An aggregation service that answers it is a single aggregator; nothing reaches it in
    these tests (every attempt ends at check-in)."""

    address = "aggregator:7100"

    async def workers(self) -> None:
        return None


def _summary(members: list[int], deadline_s: float) -> dict[str, object]:
    return {"aggregator_round_id": "t/1/1", "round_config": "", **stored_members_field(members),
            "deadline_unix_ms": int(deadline_s * 1000)}


def test_the_stored_cohort_of_an_attempt_single_or_sharded_and_none_without_one() -> None:
    assert stored_cohort(_summary([5, 3], 100.0)) == (frozenset({3, 5}), 100_000)
    sharded = {"aggregator_round_id": "t/1/1", "sharded": True, "deadline_unix_ms": 7,
               "shards": [{**stored_members_field([1, 2]), "worker": 0},
                          {**stored_members_field([9]), "worker": 1}]}
    assert stored_cohort(sharded) == (frozenset({1, 2, 9}), 7)
    assert stored_cohort({"steps": [["check-in", 1.0]]}) is None  # aborted at check-in
    assert stored_cohort({**stored_members_field([1]), "kept": 2}) is None  # no deadline


def test_expect_keeps_a_cohort_the_lobby_waits_for_longer() -> None:
    lobby = Lobby()
    assert lobby.expect([1, 2], 200.0)
    assert not lobby.expect([3], 150.0)
    assert lobby.expect([4], 250.0)


def test_a_restarted_coordinator_holds_its_first_check_in_for_the_stored_cohort(
        tmp_path: Path) -> None:
    """The stopped process aborted attempt 1.1 after handing its cohort (devices 5, 6, 7)
    their tasks; they wind that round down until its last deadline (a minute from now) plus
    30 s. The restarted one's first check-in ends short of min_devices: it is held for them
    (before, it closed at its 50 ms window, and with every attempt so, the run failed within
    a second)."""
    store = Store(tmp_path / "coordinator.sqlite")
    config = RunConfig(eps_agg=4.0, delta=1e-6, rounds=1, max_bits=16, target_devices=400,
                       min_devices=300, checkin_ms=50, checkin_quiet_ms=10)
    members = [5, 6, 7]

    async def go() -> None:
        await create_run(store, config, "t")
        attempt = store.open_round("t", 1)
        store.annotate_round("t", 1, attempt, _summary(members, time.time() + 60))
        store.abort_round("t", 1, attempt, "the aggregator aborted it (too_few_devices)")

        lobby = Lobby()
        runner = Runner(store, _SingleAggregator(),  # type: ignore[arg-type]
                        Ed25519PrivateKey.generate(),
                        DeviceAddresses("aggregator:7100", "https://aggregator:7180"), lobby,
                        LifetimeBudget(eps=1e9, delta=0.5))
        runner.retry_delay_s = 0.01
        driving = asyncio.create_task(runner.drive("t"))
        loop = asyncio.get_running_loop()
        until = loop.time() + 30  # (generous: a busy machine)
        while not lobby.is_held and not driving.done() and loop.time() < until:
            await asyncio.sleep(0.01)
        held, ended = lobby.is_held, driving.done()
        driving.cancel()
        with pytest.raises(BaseException):  # noqa: B017 (cancelled, or the old code's failure)
            await driving
        assert held and not ended, "the first check-in was not held for the stored cohort"

    asyncio.run(go())


def test_a_cohort_past_its_bound_is_not_waited_for(tmp_path: Path) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    lobby = Lobby()
    runner = Runner(store, _SingleAggregator(),  # type: ignore[arg-type]
                    Ed25519PrivateKey.generate(),
                    DeviceAddresses("aggregator:7100", "https://aggregator:7180"), lobby,
                    LifetimeBudget(eps=1e9, delta=0.5))

    store.create_run("t", {}, 1.0, {}, {}, [])  # (only its attempts are read here)
    attempt = store.open_round("t", 1)
    store.annotate_round("t", 1, attempt, _summary([5], time.time() - 31))
    runner._expect_last_cohort("t")
    assert not lobby._busy
    store.annotate_round("t", 1, attempt, _summary([5], time.time()))
    runner._expect_last_cohort("t")
    assert lobby._busy == {5}
