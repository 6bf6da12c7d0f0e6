"""``FrameWriter``'s turns (``fedhh.rpc.framed.frames``): while its transport is paused, a sender
waits, and a payload given as a function is not made until the sender's turn; turns come in
order of arrival, one sender per turn of the loop once the transport resumed, and a sender that
leaves or fails passes its turn on. A fake transport records what is written and pauses the
writer above a high-water mark, as uvloop's transports do."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
import uvloop

from fedhh.rpc.framed.frames import HEADER, FrameSplitter, FrameWriter, Kind

T = TypeVar("T")
HIGH_WATER = 1 << 16


class Transport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.writer: FrameWriter | None = None

    def write(self, data: bytes) -> None:
        self.written += data
        if len(self.written) > HIGH_WATER and self.writer is not None:
            self.writer.pause()

    def drain(self) -> list[tuple[int, bytes]]:
        """What was written, as (stream id, payload); the buffer empties and the writer resumes."""
        frames = [(stream_id, payload or b"")
                  for stream_id, _, payload in FrameSplitter(1 << 24).feed(bytes(self.written))]
        self.written.clear()
        assert self.writer is not None
        self.writer.resume()
        return frames

    def is_closing(self) -> bool:
        return False


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(asyncio.wait_for(coro, 30))


async def turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def writer() -> tuple[FrameWriter, Transport]:
    transport = Transport()
    transport.writer = FrameWriter(transport)
    return transport.writer, transport


def maker(made: list[int], n: int, size: int = 1000) -> Callable[[], bytes]:
    def make() -> bytes:
        made.append(n)
        return bytes([n]) * size
    return make


def test_a_writer_that_is_not_paused_sends_at_once() -> None:
    async def main() -> None:
        frames, transport = writer()
        made: list[int] = []
        await frames.send(1, Kind.EVENT, maker(made, 1))
        await frames.send(2, Kind.EVENT, b"two")
        assert made == [1]
        await turns(2)
        assert transport.drain() == [(1, bytes([1]) * 1000), (2, b"two")]
    run(main())


def test_payloads_are_made_in_turn_after_a_pause() -> None:
    async def main() -> None:
        frames, transport = writer()
        frames.pause()
        made: list[int] = []
        senders = [asyncio.create_task(frames.send(n, Kind.EVENT, maker(made, n, 40_000)))
                   for n in range(1, 11)]
        await turns()
        assert made == [] and transport.written == b""
        received: list[int] = []
        while len(received) < 10:
            frames.resume()
            await turns()
            # Two frames of 40 kB pass the 64 KiB mark: the transport pauses the writer.
            assert len(made) - len(received) <= 2 + 1, (made, received)
            received += [stream_id for stream_id, _ in transport.drain()]
        assert made == received == list(range(1, 11))
        await asyncio.gather(*senders)
    run(main())


def test_a_sender_that_leaves_passes_its_turn_on() -> None:
    async def main() -> None:
        frames, transport = writer()
        frames.pause()
        made: list[int] = []
        first = asyncio.create_task(frames.send(1, Kind.EVENT, maker(made, 1)))
        second = asyncio.create_task(frames.send(2, Kind.EVENT, maker(made, 2)))
        third = asyncio.create_task(frames.send(3, Kind.EVENT, maker(made, 3)))
        await turns()
        second.cancel()  # (before its turn)
        frames.resume()  # (the first's turn: it is cancelled before it runs)
        first.cancel()
        await asyncio.wait_for(third, 5)
        assert made == [3] and first.cancelled() and second.cancelled()
        await turns(2)
        assert transport.drain() == [(3, bytes([3]) * 1000)]
    run(main())


def test_a_payload_that_fails_passes_the_turn_on() -> None:
    def fail() -> bytes:
        raise ValueError("cannot encode")

    async def main() -> None:
        frames, _ = writer()
        frames.pause()
        made: list[int] = []
        failing = asyncio.create_task(frames.send(1, Kind.EVENT, fail))
        after = asyncio.create_task(frames.send(2, Kind.EVENT, maker(made, 2)))
        await turns()
        frames.resume()
        with pytest.raises(ValueError, match="cannot encode"):
            await failing
        await asyncio.wait_for(after, 5)
        assert made == [2]
    run(main())


def test_released_senders_all_go_on() -> None:
    async def main() -> None:
        frames, _ = writer()
        frames.pause()
        made: list[int] = []
        senders = [asyncio.create_task(frames.send(n, Kind.EVENT, maker(made, n)))
                   for n in range(5)]
        await turns()
        frames.pause()
        frames.release()  # (the connection is lost: nothing waits for a resume)
        await asyncio.wait_for(asyncio.gather(*senders), 5)
        assert sorted(made) == list(range(5))
        await frames.send(9, Kind.EVENT, b"x")  # (and nothing waits after)
    run(main())


def test_frames_added_directly_do_not_wait() -> None:
    async def main() -> None:
        frames, transport = writer()
        frames.pause()
        frames.add(7, Kind.END, b"end")
        await turns(2)
        assert bytes(transport.written) == HEADER.pack(7, Kind.END, 3) + b"end"
    run(main())
