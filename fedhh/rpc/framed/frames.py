"""The framed port's wire format (docs/secagg.md, "The framed port").

Over TLS (plaintext on loopback only, as gRPC's port), the client first sends ``PREFACE``;
then both sides send frames: a 9-byte header (stream id as u32, kind as u8, payload length as
u32, big-endian) and the payload. A connection carries many calls, each a stream told apart by
the id the client gave it; ids only rise on a connection. The client's frames: ``OPEN`` (a
``FramedOpen``: the method's path and the call's metadata), ``MESSAGE`` (a request message of
the method), ``CLOSE`` (it sends no more: gRPC's half-close), ``CANCEL`` (it left the call).
The server's: ``EVENT`` (a response message) and ``END`` (a ``FramedEnd``: the status and
trailing metadata gRPC would send; a stream's last frame).
"""

from __future__ import annotations

import asyncio
import collections
import struct
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import Any

__all__ = ["ALPN", "HEADER", "PREFACE", "FrameError", "FrameSplitter", "FrameWriter", "Kind"]

PREFACE = b"fedhh-framed/1\r\n"
ALPN = "fedhh-framed/1"
HEADER = struct.Struct(">IBI")
MAX_STREAM_ID = (1 << 32) - 1


class Kind(IntEnum):
    OPEN = 1
    MESSAGE = 2
    CLOSE = 3
    CANCEL = 4
    EVENT = 5
    END = 6


class FrameError(Exception):
    """The peer broke the framing: the connection is closed."""


class FrameWriter:
    """A connection's outgoing frames, written together once per turn of the event loop. Each
    write to a TLS transport is a call into OpenSSL and a record of its own (two for a header
    and its payload written apart), and a connection that carries many streams (a device
    process's) sends many frames in one turn: a stage's requests, pushed as it closes. Frames
    of ``FLUSH_AT`` bytes and more together are written at once, so the transport asks for
    back-pressure (``pause_writing``) within the turn. The connection's protocol hands its
    ``pause_writing`` and ``resume_writing`` on (``pause``, ``resume``).

    ``send`` waits its turn before it adds a frame: at once while the transport takes data and
    nobody waits, else in order of arrival, one sender per turn of the loop once the transport
    resumed (each passes the turn on if the transport still takes data). A payload may be a
    function that makes it, called when the turn comes: when a stage closes, each of a
    connection's thousands of streams pushes a request of tens of KiB, and encoding them all
    at once kept every one in memory until its device read it (at 10,000 devices, 130 MiB of a
    worker's 340 MiB of Python objects; the whole round's requests at 50,000)."""

    FLUSH_AT = 1 << 16

    __slots__ = ("_loop", "_paused", "_pending", "_size", "_transport", "_waiting")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._pending: list[bytes] = []
        self._size = 0
        self._paused = False
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self._pass_turn()

    def release(self) -> None:
        """The connection is lost: every sender goes on at once (what they add is dropped)."""
        self._paused = False
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def send(self, stream_id: int, kind: Kind,
                   payload: bytes | Callable[[], bytes] = b"") -> None:
        """``add`` the frame once this sender's turn has come (``payload()`` is called then)."""
        if self._paused or self._waiting:
            await self._turn()
        if callable(payload):
            try:
                payload = payload()
            except BaseException:
                self._pass_turn()
                raise
        self.add(stream_id, kind, payload)

    async def _turn(self) -> None:
        waiter = self._loop.create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._pass_turn()  # (it was this sender's: the next one's now)
            else:
                self._waiting.remove(waiter)
            raise

    def _pass_turn(self) -> None:
        while self._waiting and not self._paused:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add(self, stream_id: int, kind: Kind, payload: bytes = b"") -> None:
        """Queue a frame now, whoever waits (a call's OPEN, END or CANCEL)."""
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(HEADER.pack(stream_id, kind, len(payload)))
        if payload:
            self._pending.append(payload)
        self._size += HEADER.size + len(payload)
        if self._size >= self.FLUSH_AT:
            self._flush()
        if self._waiting:
            self._pass_turn()

    def _flush(self) -> None:
        if not self._pending:
            return  # (written at once meanwhile)
        data = b"".join(self._pending)
        self._pending.clear()
        self._size = 0
        if not self._transport.is_closing():
            self._transport.write(data)


class FrameSplitter:
    """A connection's bytes as frames. A frame whose payload is above ``max_payload`` comes out
    with ``None`` for its payload as soon as its header has arrived, and its bytes are skipped
    as they come (the stream it names is refused; the connection's other streams go on)."""

    __slots__ = ("_buffer", "_skip", "max_payload")

    def __init__(self, max_payload: int) -> None:
        self.max_payload = max_payload
        self._buffer = bytearray()
        self._skip = 0  # bytes of an oversize payload still to drop

    def feed(self, data: bytes) -> Iterator[tuple[int, int, bytes | None]]:
        """The frames ``data`` completes: (stream id, kind, payload or None if oversize).

        Each payload is copied once, out of ``data`` itself where no partial frame was held
        (only what ends in a partial frame is kept): a device's shares and vector are tens of
        kilobytes, and appending each read to the buffer first, then slicing the buffer, then
        making bytes of the slice, copied them three times."""
        if self._skip:
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            data = data[dropped:]
        buffer = self._buffer
        if buffer:
            buffer += data
            source: bytes | bytearray = buffer
        else:
            source = data
        start, end, size = 0, len(source), HEADER.size
        view = memoryview(source)
        try:
            while end - start >= size:
                stream_id, kind, length = HEADER.unpack_from(source, start)
                if length > self.max_payload:
                    dropped = min(length, end - start - size)
                    start += size + dropped
                    self._skip = length - dropped
                    yield stream_id, kind, None
                    continue
                if end - start - size < length:
                    break
                payload = view[start + size:start + size + length].tobytes()
                start += size + length
                yield stream_id, kind, payload
        finally:
            view.release()
        if source is buffer:
            del buffer[:start]
        elif start < end:
            buffer += memoryview(data)[start:]
