"""Slots for handing stage requests to gRPC: a bound on the requests being encoded and
written at once that no device can keep.

When a stage opens, every device's request is due at the same moment, and each one's bytes
(a roster is ~k x 0.5 KB) lived until gRPC had taken them all: at 25,000 devices a worker,
most of its peak memory. A plain semaphore held until the write completes would bound that,
but a write completes only once the stream's flow-control window has room for it, that is,
once the device reads: devices that stop reading would keep every slot and stall everyone's
requests. So a slot goes back when its holder leaves or after ``hand_off_s``, whichever comes
first; a write still waiting then keeps its own bytes, as every write did before.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from fedhh_aggregator import metrics

__all__ = ["HandOffSlots"]


class HandOffSlots:
    """At most ``limit`` holders at once, each for at most ``hand_off_s`` (``async with
    slots.hold(): ...``)."""

    def __init__(self, limit: int, hand_off_s: float) -> None:
        self._slots = asyncio.Semaphore(limit)
        self.hand_off_s = hand_off_s

    def hold(self) -> _Hold:
        return _Hold(self._slots, self.hand_off_s)


class _Hold:
    __slots__ = ("_hand_off_s", "_slots", "_timer")

    def __init__(self, slots: asyncio.Semaphore, hand_off_s: float) -> None:
        self._slots: asyncio.Semaphore | None = slots
        self._hand_off_s = hand_off_s
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> None:
        assert self._slots is not None
        await self._slots.acquire()
        self._timer = asyncio.get_running_loop().call_later(self._hand_off_s, self._timed_out)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._give_back()

    def _timed_out(self) -> None:
        metrics.SLOW_HAND_OFFS.inc()
        self._give_back()

    def _give_back(self) -> None:
        if self._slots is not None:
            slots, self._slots = self._slots, None
            slots.release()
