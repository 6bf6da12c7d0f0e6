"""The framed session port's wire format (docs/secagg.md, "The framed session port").

Over TLS (plaintext on loopback only, as gRPC's port), the client first sends ``PREFACE``;
then both sides send frames: a 9-byte header (stream id as u32, kind as u8, payload length as
u32, big-endian) and the payload. A connection carries many streams, told apart by the id the
client gave each; ids only rise on a connection. The client's frames: ``OPEN`` (empty; a new
stream), ``MESSAGE`` (a ``SessionMessage``), ``CLOSE`` (it sends no more: gRPC's half-close),
``CANCEL`` (it left the stream). The server's: ``EVENT`` (a ``SessionEvent``) and ``END`` (a
``SessionEnd``: the status and trailing metadata gRPC would send; a stream's last frame).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum

__all__ = ["ALPN", "HEADER", "PREFACE", "FrameError", "FrameSplitter", "Kind", "frame"]

PREFACE = b"fedhh-session/1\r\n"
ALPN = "fedhh-session/1"
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


def frame(stream_id: int, kind: Kind, payload: bytes = b"") -> bytes:
    return HEADER.pack(stream_id, kind, len(payload)) + payload


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
        """The frames ``data`` completes: (stream id, kind, payload or None if oversize)."""
        if self._skip:
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            data = data[dropped:]
        buffer = self._buffer
        buffer += data
        start, end, size = 0, len(buffer), HEADER.size
        while end - start >= size:
            stream_id, kind, length = HEADER.unpack_from(buffer, start)
            if length > self.max_payload:
                dropped = min(length, end - start - size)
                start += size + dropped
                self._skip = length - dropped
                yield stream_id, kind, None
                continue
            if end - start - size < length:
                break
            payload = bytes(buffer[start + size:start + size + length])
            start += size + length
            yield stream_id, kind, payload
        del buffer[:start]

    @property
    def pending(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buffer)
