"""The listener's head grace (``Listener._head_deadline``, ``HEAD_GRACE_S``) is given once a
connection: a client that drips a byte into the socket just before each deadline, or opens
many connections that each do, holds none of them past ``head_timeout_s + HEAD_GRACE_S``.
The deadlines are driven by a fake clock (the loop's ``call_later`` recorded, each timer run
by hand), the bytes are real ones in a socketpair (``_unread`` asks poll of its descriptor)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from fedhh.rpc.http_listener import HEAD_GRACE_S, Listener

HEAD_TIMEOUT_S = 10.0


class FakeTransport:
    """The server's end of a connection as ``_head_deadline`` reads it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.aborted = False

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True


class FakeProtocol:
    """aiohttp's two words of a parsed head (``_head_parsed``): none yet."""

    def __init__(self) -> None:
        self._messages: list[Any] = []
        self._request_in_progress = False


class FakeClock:
    """The loop's timers, kept in order of when they fall due instead of waited for."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[..., None], tuple[Any, ...]]] = []

    def call_later(self, delay: float, callback: Callable[..., None], *args: Any) -> None:
        self.timers.append((self.now + delay, callback, args))

    def run_next(self) -> None:
        self.timers.sort(key=lambda timer: timer[0])
        self.now, callback, args = self.timers.pop(0)
        callback(*args)


def drip(client: socket.socket, server: socket.socket) -> None:
    """The loop reads what waited, and the client sends one byte more of a head never ended."""
    server.setblocking(False)
    with contextlib.suppress(BlockingIOError):  # (nothing waited: the first deadline)
        server.recv(4096)
    client.send(b"G")


@pytest.mark.parametrize("connections", [1, 8])
def test_a_byte_before_each_deadline_holds_a_connection_one_grace_at_most(
        connections: int) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        loop: Any = asyncio.get_running_loop()
        loop.call_later = clock.call_later  # (this loop's timers only; it ends with the test)
        listener = Listener(SimpleNamespace(connections=[]), None,
                            head_timeout_s=HEAD_TIMEOUT_S)
        pairs = [socket.socketpair() for _ in range(connections)]
        try:
            held = []
            for client, server in pairs:
                protocol = FakeProtocol()
                transport = FakeTransport(server)
                listener._pending_heads.add(protocol)
                clock.call_later(HEAD_TIMEOUT_S, listener._head_deadline, transport, protocol)
                held.append((client, server, transport, protocol))
            # Before every deadline, each client has a byte in the socket that the loop has
            # not read: the case the grace is for, repeated.
            while clock.timers:
                for client, server, transport, _ in held:
                    if not transport.aborted:
                        drip(client, server)
                clock.run_next()
                assert clock.now <= HEAD_TIMEOUT_S + HEAD_GRACE_S
            assert clock.now == HEAD_TIMEOUT_S + HEAD_GRACE_S
            assert all(transport.aborted for _, _, transport, _ in held)
            assert not listener._pending_heads  # nothing kept of the connections cut
        finally:
            for client, server in pairs:
                client.close()
                server.close()

    asyncio.run(scenario())


def test_a_head_parsed_within_the_grace_is_kept() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        loop: Any = asyncio.get_running_loop()
        loop.call_later = clock.call_later
        listener = Listener(SimpleNamespace(connections=[]), None,
                            head_timeout_s=HEAD_TIMEOUT_S)
        client, server = socket.socketpair()
        try:
            protocol = FakeProtocol()
            transport = FakeTransport(server)
            listener._pending_heads.add(protocol)
            client.send(b"GET / HTTP/1.1\r\n")
            listener._head_deadline(transport, protocol)
            assert len(clock.timers) == 1 and not transport.aborted
            protocol._messages.append(("the head", "its body"))  # the loop parsed it
            clock.run_next()
            assert not transport.aborted and not clock.timers
            assert not listener._pending_heads
        finally:
            client.close()
            server.close()

    asyncio.run(scenario())
