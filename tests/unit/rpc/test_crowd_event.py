"""fedhh.rpc.crowd_event: asyncio.Event's behaviour, with waiters that leave in O(1)."""

from __future__ import annotations

import asyncio
import contextlib

from fedhh.rpc.crowd_event import CrowdEvent


def test_set_wakes_every_waiter_and_a_later_wait_returns_at_once() -> None:
    async def main() -> None:
        event = CrowdEvent()
        waiters = [asyncio.create_task(event.wait()) for _ in range(100)]
        await asyncio.sleep(0)  # (each waiter has begun its wait)
        assert not any(w.done() for w in waiters) and not event.is_set()
        event.set()
        assert all(await asyncio.gather(*waiters))
        assert event.is_set() and await event.wait()
        event.clear()
        assert not event.is_set()
        late = asyncio.create_task(event.wait())
        await asyncio.sleep(0)
        assert not late.done()
        event.set()
        assert await late

    asyncio.run(main())


def test_waits_that_run_out_or_are_cancelled_leave_no_waiter_behind() -> None:
    async def main() -> None:
        event = CrowdEvent()
        cancelled = [asyncio.create_task(event.wait()) for _ in range(50)]
        timed = [asyncio.create_task(asyncio.wait_for(event.wait(), 0.001)) for _ in range(50)]
        staying = asyncio.create_task(event.wait())
        await asyncio.sleep(0)
        for task in cancelled[::-1]:  # (in another order than they came)
            task.cancel()
        for task in [*cancelled, *timed]:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await task
        assert len(event._waiters) == 1 and not staying.done()
        event.set()
        assert await staying
        assert not event._waiters

    asyncio.run(main())


def test_set_wakes_the_waiters_in_the_order_they_came() -> None:
    """As asyncio.Event: a selector's devices, woken by the check-in's opening, join it in the
    order they began to wait. Before, the waiters were a set, woken in their hashes' order."""
    async def main() -> None:
        event = CrowdEvent()
        woken: list[int] = []

        async def wait(i: int) -> None:
            await event.wait()
            woken.append(i)

        waiters = [asyncio.create_task(wait(i)) for i in range(200)]
        await asyncio.sleep(0)
        event.set()
        await asyncio.gather(*waiters)
        assert woken == list(range(200))

    asyncio.run(main())
