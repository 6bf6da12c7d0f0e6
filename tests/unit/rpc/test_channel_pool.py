"""A device process's calls to one service spread over channels (``fedhh.rpc.channel_pool``):
another channel once every one holds ``per_channel`` calls, each call on the first with room, so
that no connection holds more streams than the service admits (its
--max-streams-per-connection; before, a device process put every device's GetTask long-poll on
one connection)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fedhh.rpc.channel_pool import StubPool


class Channel:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class Stub:
    """GetTask waits until the test answers it; the answer names the channel it came on."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.waiting: list[asyncio.Future[int]] = []

    async def GetTask(self, request: Any, *, timeout: float | None = None) -> tuple[int, Any]:
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting.append(answer)
        await answer
        return self.channel.number, request


def made() -> tuple[list[Channel], Any]:
    channels: list[Channel] = []

    def make() -> Channel:
        channels.append(Channel(len(channels)))
        return channels[-1]
    return channels, make


def test_calls_past_a_channels_share_go_to_another_channel() -> None:
    async def scenario() -> None:
        channels, make = made()
        pool = StubPool(make, Stub, ["GetTask"], per_channel=2)
        assert len(channels) == 1  # (the first at once: an address that cannot work fails)
        calls = [asyncio.create_task(pool.GetTask(i, timeout=5)) for i in range(5)]
        await asyncio.sleep(0)  # (each call has started)
        assert len(channels) == 3 and pool.in_flight == [2, 2, 1]
        pool._stubs[0].waiting[0].set_result(0)
        assert await calls[0] == (0, 0)
        assert pool.in_flight == [1, 2, 1]
        # A freed place is taken before any later channel's.
        sixth = asyncio.create_task(pool.GetTask(5))
        await asyncio.sleep(0)
        assert pool.in_flight == [2, 2, 1] and len(channels) == 3
        for stub in pool._stubs:
            for answer in stub.waiting:
                if not answer.done():
                    answer.set_result(0)
        assert [await call for call in [*calls[1:], sixth]] == [
            (0, 1), (1, 2), (1, 3), (2, 4), (0, 5)]
        assert pool.in_flight == [0, 0, 0]
        await pool.close()
        assert all(channel.closed for channel in channels)

    asyncio.run(scenario())


def test_a_call_that_fails_or_is_cancelled_gives_its_place_back() -> None:
    class Failing(Stub):
        async def GetTask(self, request: Any, *, timeout: float | None = None
                          ) -> tuple[int, Any]:
            if request == "fail":
                raise RuntimeError("unavailable")
            return await super().GetTask(request, timeout=timeout)

    async def scenario() -> None:
        _, make = made()
        pool = StubPool(make, Failing, ["GetTask"], per_channel=1)
        with pytest.raises(RuntimeError):
            await pool.GetTask("fail")
        waiting = asyncio.create_task(pool.GetTask("wait"))
        await asyncio.sleep(0)
        assert pool.in_flight == [1]
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pool.in_flight == [0]

    asyncio.run(scenario())


def test_only_the_services_methods_are_attributes() -> None:
    _, make = made()
    pool = StubPool(make, Stub, ["GetTask"], per_channel=1)
    assert not hasattr(pool, "Enroll")
    with pytest.raises(ValueError, match="per_channel must be >= 1, got 0"):
        StubPool(make, Stub, ["GetTask"], per_channel=0)
