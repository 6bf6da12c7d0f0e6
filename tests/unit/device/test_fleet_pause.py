"""A fleet's pauses (backoff, no task yet) wait on the stop event through one waiter, not one
each: a pause that ran out left asyncio.Event's deque by a scan from the front, O(devices)
each, so a fleet of thousands of devices in backoff was quadratic. They still end at once when
the fleet is stopped, and after their time otherwise."""

from __future__ import annotations

import asyncio

import numpy as np

from fedhh_device.fleet import Fleet
from fedhh_device.report import DeviceData

PAUSES = 1000


class CountingEvent(asyncio.Event):
    """An asyncio.Event that records the most waits in flight on it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = self.most = 0

    async def wait(self) -> bool:  # type: ignore[override]
        self.waiting += 1
        self.most = max(self.most, self.waiting)
        try:
            return await super().wait()
        finally:
            self.waiting -= 1


def fleet(stop: asyncio.Event) -> Fleet:
    data = DeviceData(("word",), np.ones(1, dtype=np.int64))
    return Fleet([(0, data)], object(), {}, lambda address: None, seed=1, stop=stop)


def test_many_pauses_hold_one_wait_on_stop_and_end_when_it_is_set() -> None:
    async def scenario() -> tuple[int, int, list[bool]]:
        stop = CountingEvent()
        devices = fleet(stop)
        pauses = [asyncio.create_task(devices._pause(3600)) for _ in range(PAUSES)]
        while stop.waiting == 0:  # (until the pauses and the relay have started)
            await asyncio.sleep(0)
        for _ in range(3):
            await asyncio.sleep(0)
        most = stop.most
        stop.set()
        await asyncio.wait_for(asyncio.gather(*pauses), 10)
        await devices.close()
        return most, stop.waiting, [p.done() for p in pauses]

    most, left, done = asyncio.run(scenario())
    assert most == 1  # (before: 1,000, one per pause)
    assert left == 0
    assert all(done)


def test_a_pause_ends_after_its_time_and_at_once_once_stopped() -> None:
    async def scenario() -> tuple[int, int]:
        stop = CountingEvent()
        devices = fleet(stop)
        await asyncio.wait_for(asyncio.gather(*(devices._pause(0.001) for _ in range(50))), 10)
        waiting_after_timeouts = stop.waiting  # (the relay's one wait)
        stop.set()
        await asyncio.wait_for(devices._pause(3600), 10)
        await devices.close()
        return waiting_after_timeouts, len(devices._stopped._waiters)

    waiting, crowd = asyncio.run(scenario())
    assert waiting == 1
    assert crowd == 0
