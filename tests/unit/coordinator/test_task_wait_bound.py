"""A GetTask's ``wait_ms`` bounds the call as a whole (coordinator.proto: "long-poll bound"), in
the coordinator's lobby and a selector's alike: a device that waited for the check-in to open
and joined it waits for its task only what is left of its bound, is told "none" then, and
finds its seat when it asks again. Before, the coordinator's lobby waited a whole ``wait_s``
again once the device had joined, up to twice the bound the device asked for (a browser
device's call, which gives up 10 s past its 55 s, was cut and its task answered to a call that
was gone), where a selector's kept to it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.selector import SelectorLobby

WAIT_S = 100.0
TASK = pb.SignedTask(task=b"task-1")


def keys(i: int) -> tuple[bytes, bytes]:
    return bytes([i]) * 32, bytes([i + 100]) * 32


class Clock:
    """The running loop's clock, moved on by hand: a wait's bound passes without the test
    waiting for it (asyncio's timeouts and timers read ``loop.time``)."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        real, self.offset = loop.time, 0.0
        loop.time = lambda: real() + self.offset  # type: ignore[method-assign]


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # (a readiness wait: each step lets the waiters run)
        await asyncio.sleep(0)


class _Coordinator:
    """The coordinator's lobby: a check-in for two devices, the first alone in it."""

    def __init__(self) -> None:
        self.lobby = Lobby()
        self.collecting: asyncio.Task[list[int]] | None = None

    def waiting_for_the_opening(self) -> bool:
        return bool(self.lobby._opened._waiters)

    async def open(self) -> None:
        self.collecting = asyncio.create_task(self.lobby.collect(capacity=2, window_s=1000))
        await _until(lambda: self.lobby.cohort_size == 1)

    async def deliver(self) -> None:
        other = asyncio.create_task(self.lobby.wait_for_task(2, keys(2), WAIT_S))
        assert self.collecting is not None and await self.collecting == [1, 2]
        self.lobby.deliver({1: TASK})
        assert await other is None


class _Selector:
    """A selector's lobby, attached to its leader, which opens a check-in."""

    def __init__(self) -> None:
        self.lobby = SelectorLobby()
        self.lobby.attached()
        self.lobby.handle(pb.LeaderMessage(closed=0))

    def waiting_for_the_opening(self) -> bool:
        return bool(self.lobby._opened._waiters)

    async def open(self) -> None:
        self.lobby.handle(pb.LeaderMessage(opened=5))
        await _until(lambda: self.lobby.pool_size == 1)

    async def deliver(self) -> None:
        self.lobby.handle(pb.LeaderMessage(tasks=pb.SelectorTasks(checkin=5, tasks={1: TASK},
                                                                  last=True)))


@pytest.mark.parametrize("make", [_Coordinator, _Selector], ids=["coordinator", "selector"])
def test_a_device_that_joined_late_in_its_wait_waits_only_what_is_left(make: Any) -> None:
    async def scenario() -> None:
        clock = Clock()
        side = make()
        waiter = asyncio.create_task(side.lobby.wait_for_task(1, keys(1), WAIT_S))
        await _until(side.waiting_for_the_opening)
        clock.offset += 90  # the check-in opens 90 s into the device's 100 s
        await side.open()
        clock.offset += 11  # past the bound, the task not yet delivered
        # (30 s only bounds a failure: the waiter's bound has passed, where the old lobby
        # waited 100 s more; at 1 s, a process stalled that long could see the timeout
        # before the woken waiter had ended)
        done, _ = await asyncio.wait({waiter}, timeout=30)
        assert waiter in done and waiter.result() is None
        # Asked again, the device finds its seat: its task comes to the new call.
        again: Awaitable[pb.SignedTask | None] = asyncio.create_task(
            side.lobby.wait_for_task(1, keys(1), WAIT_S))
        await side.deliver()
        assert await again == TASK

    asyncio.run(asyncio.wait_for(scenario(), 1000))  # (on the clock moved by hand)
