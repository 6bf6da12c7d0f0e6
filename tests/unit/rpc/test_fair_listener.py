"""A fair listener (``fedhh.rpc.http_listener``, the Connect ports' and the dashboard's): when
every connection is held, a newcomer takes the place of an idle connection of the address that
holds the most. Before: one client that opened every connection kept every other out."""

from __future__ import annotations

import asyncio

from aiohttp import web

from fedhh.rpc.http_listener import serve_app

CAP = 4
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


async def answered(source: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A keep-alive connection from ``source`` whose first request was answered (it is idle)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(REQUEST)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert await reader.readexactly(2) == b"ok"
    return reader, writer


def test_a_newcomer_takes_an_idle_place_of_the_address_that_holds_every_one() -> None:
    async def scenario() -> None:
        app = web.Application()

        async def hello(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app.router.add_get("/", hello)
        served = await serve_app(app, "test port", None, "127.0.0.1", 0, {}, CAP)
        listener, port = served.listener, served.port
        try:
            hog = [await answered("127.0.0.1", port) for _ in range(CAP)]
            # One more from the hog's own address: refused (it holds the most already).
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(reader.read(), 20) == b""
            writer.close()
            assert listener.refused == 1 and listener.evicted == 0
            # Another address: served, in place of one of the hog's idle connections.
            reads = [asyncio.create_task(r.read()) for r, _ in hog]
            _, newcomer = await asyncio.wait_for(answered("127.0.0.2", port), 20)
            assert listener.evicted == 1
            closed, _ = await asyncio.wait(reads, timeout=20,
                                           return_when=asyncio.FIRST_COMPLETED)
            assert [task.result() for task in closed] == [b""]  # one of the hog's, closed
            newcomer.close()
            for _, w in hog:
                w.close()
            await asyncio.gather(*reads, return_exceptions=True)
        finally:
            await served.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
