"""The coordinator's check-in: who joins a round's cohort, with which round keys, and when a
device that already holds its task waits."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from fedhh.errors import ConfigError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.lobby import Lobby


def keys(i: int) -> tuple[bytes, bytes]:
    return bytes([i]) * 32, bytes([i + 100]) * 32


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, 10))  # type: ignore[arg-type]


def test_the_cohort_keeps_the_keys_each_device_joined_with() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=2, window_s=5))
        waiters = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 5)) for d in (7, 8)]
        assert await collecting == [7, 8]
        assert lobby.round_keys(7) == keys(7) and lobby.round_keys(8) == keys(8)
        # A retried call of a member with other keys changes nothing: the round commits to
        # the keys of the call that joined.
        retry = asyncio.create_task(lobby.wait_for_task(7, keys(9), 5))
        task = pb.SignedTask(task=b"task-7")
        lobby.deliver({7: task})
        assert await waiters[0] == task and await retry == task
        assert await waiters[1] is None  # a member without a task gets nothing
        assert lobby.round_keys(7) == keys(7)
        lobby.clear()
        with pytest.raises(KeyError):
            lobby.round_keys(7)

    run(scenario())


def test_keys_already_presented_by_another_device_are_refused() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=5))
        await asyncio.sleep(0)  # let check-in open
        first = asyncio.create_task(lobby.wait_for_task(1, keys(1), 5))
        await asyncio.sleep(0)
        for copied in (keys(1), (keys(1)[1], bytes(32)), (bytes(32), keys(1)[0])):
            with pytest.raises(ConfigError, match="already presented"):
                await lobby.wait_for_task(2, copied, 5)
        assert lobby.cohort_size == 1
        second = asyncio.create_task(lobby.wait_for_task(2, keys(2), 5))
        third = asyncio.create_task(lobby.wait_for_task(3, keys(3), 5))
        assert await collecting == [1, 2, 3]
        lobby.clear()
        assert [await w for w in (first, second, third)] == [None, None, None]

    run(scenario())


def test_a_device_holding_its_task_waits_for_the_round_to_end() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=1, window_s=5))
        await asyncio.sleep(0)
        waiter = asyncio.create_task(lobby.wait_for_task(1, keys(1), 5))
        await collecting
        task = pb.SignedTask(task=b"task-1")
        lobby.deliver({1: task})
        assert await waiter == task
        # Asking again without saying it holds the task: the same task (a lost response).
        assert await lobby.wait_for_task(1, keys(1), 5) == task
        known = hashlib.sha256(task.task).digest()
        holding = asyncio.create_task(lobby.wait_for_task(1, keys(1), 0.5, known))
        await asyncio.sleep(0.01)
        assert not holding.done()
        lobby.clear()
        assert await holding is None  # no round open after this one

    run(scenario())
