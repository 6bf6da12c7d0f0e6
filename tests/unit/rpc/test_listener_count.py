"""A listener (``fedhh.rpc.http_listener.Listener``) counts each connection once: from its
accept, through its handshake, to its end. Before, a connection that had joined its server's
connections was counted twice until the listener's own task for it went on, so that one
arriving then was refused with a place free (of a framed port capped at three, two
connections made at once left the third refused)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fedhh.rpc.http_listener import Listener

BOUND_S = 20.0  # the most any awaited outcome may take on a busy machine


class Recorded(asyncio.Protocol):
    """A connection that notes what the listener counted as it joined its server's."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server.connections.add(self)
        assert self.server.listener is not None
        self.server.counted.append(self.server.listener.held)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)


class Server:
    def __init__(self) -> None:
        self.connections: set[Recorded] = set()
        self.counted: list[int] = []
        self.listener: Listener | None = None

    def __call__(self) -> Recorded:
        return Recorded(self)


async def until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not predicate():
        assert time.monotonic() < deadline, f"not within {BOUND_S} s: {what}"
        await asyncio.sleep(0.005)


def test_a_connection_is_counted_once_as_it_joins_and_a_place_it_left_free_is_taken() -> None:
    async def scenario() -> None:
        server = Server()
        listener = server.listener = Listener(server, None, max_connections=2,
                                              name="test port")
        port = listener.bind("127.0.0.1", 0)
        listener.start()
        clients = []
        try:
            for n in (1, 2):
                clients.append(await asyncio.open_connection("127.0.0.1", port))
                await until(lambda n=n: len(server.counted) == n, f"connection {n} joined")
            assert server.counted == [1, 2] and listener.refused == 0  # (before, [2, 3])
            await until(lambda: listener.held == 2, "both settled")
            reader, writer = await asyncio.open_connection("127.0.0.1", port)  # one over
            clients.append((reader, writer))
            assert await asyncio.wait_for(reader.read(), BOUND_S) == b""
            assert listener.refused == 1 and listener.held == 2
        finally:
            for _, writer in clients:
                writer.close()
            await listener.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
