"""An event that thousands of coroutines wait on, each leaving in O(1).

``asyncio.Event.wait`` keeps its waiters in a deque and each waiter removes itself from it
when its wait ends (``deque.remove``, a scan from the front). A selector's devices wait on one
event each for the check-in to open and for their round to end, and a wait that runs out
(``asyncio.wait_for``) leaves from the middle: at 50,000 devices (25,000 at each selector) the
removals cost the selectors 129 us per device, a tenth of that at 5,000 (docs/benchmarks.md,
"A crowd's waits"). Here the waiters are a dict's keys: each leaves in O(1), and ``set`` wakes
them in the order they came, as ``asyncio.Event`` does (a set woke them in its hashes' order,
the futures' addresses).
"""

from __future__ import annotations

import asyncio

__all__ = ["CrowdEvent"]


class CrowdEvent:
    """``asyncio.Event``'s ``set``, ``clear``, ``is_set`` and ``wait``, for many waiters."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: dict[asyncio.Future[None], None] = {}

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> bool:
        """Until the event is set (at once if it is); True."""
        if self._set:
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[waiter] = None
        try:
            await waiter
            return True
        finally:
            self._waiters.pop(waiter, None)
