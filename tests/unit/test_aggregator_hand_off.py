"""The aggregator's push slots (fedhh_aggregator.hand_off): at most so many holders at once,
and a holder that stays past the hand-off time (a write waiting for a device that does not
read) gives its slot back, once. No network; waits are on the holders' own events."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from fedhh_aggregator.hand_off import HandOffSlots

_SLOW = "fedhh_aggregator_slow_hand_offs_total"


def _slow() -> float:
    return REGISTRY.get_sample_value(_SLOW) or 0.0


async def _holder(slots: HandOffSlots, entered: asyncio.Event, leave: asyncio.Event) -> None:
    async with slots.hold():
        entered.set()
        await leave.wait()


async def _turns(count: int = 20) -> None:
    """Let the event loop run everything that is ready, a few times over."""
    for _ in range(count):
        await asyncio.sleep(0)


def test_holders_beyond_the_limit_wait_for_a_slot() -> None:
    async def scenario() -> None:
        slots = HandOffSlots(2, hand_off_s=600)
        entered = [asyncio.Event() for _ in range(3)]
        leave = [asyncio.Event() for _ in range(3)]
        tasks = [asyncio.create_task(_holder(slots, entered[i], leave[i])) for i in range(3)]
        await entered[0].wait()
        await entered[1].wait()
        await _turns()
        assert not entered[2].is_set()
        leave[0].set()
        await entered[2].wait()
        for event in leave:
            event.set()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())


def test_a_holder_past_the_hand_off_gives_its_slot_back_once() -> None:
    async def scenario() -> None:
        slots = HandOffSlots(1, hand_off_s=0.05)
        before = _slow()
        stuck_in, stuck_out = asyncio.Event(), asyncio.Event()
        stuck = asyncio.create_task(_holder(slots, stuck_in, stuck_out))
        await stuck_in.wait()
        # The stuck holder never leaves on its own: the next one gets in after the hand-off.
        next_in, next_out = asyncio.Event(), asyncio.Event()
        following = asyncio.create_task(_holder(slots, next_in, next_out))
        async with asyncio.timeout(30):
            await next_in.wait()
        assert _slow() == before + 1
        # The stuck holder's leaving later gives nothing back a second time: one slot still.
        stuck_out.set()
        await stuck
        third_in, third_out = asyncio.Event(), asyncio.Event()
        third = asyncio.create_task(_holder(slots, third_in, third_out))
        await _turns()
        assert not third_in.is_set()
        next_out.set()
        await third_in.wait()
        third_out.set()
        await asyncio.gather(following, third)
        assert _slow() == before + 1

    asyncio.run(scenario())


def test_a_holder_cancelled_while_waiting_takes_no_slot() -> None:
    async def scenario() -> None:
        slots = HandOffSlots(1, hand_off_s=600)
        first_in, first_out = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(_holder(slots, first_in, first_out))
        await first_in.wait()
        waiting = asyncio.create_task(_holder(slots, asyncio.Event(), asyncio.Event()))
        await _turns()
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        first_out.set()
        await first
        last_in, last_out = asyncio.Event(), asyncio.Event()
        last = asyncio.create_task(_holder(slots, last_in, last_out))
        await last_in.wait()
        last_out.set()
        await last

    asyncio.run(scenario())
