"""A Connect call whose body's HTTP framing breaks while the handler reads it (a bad chunk size
after a good chunk, a chunk longer than its size) is the sender's fault: one answer, 400
invalid_argument in Connect's error shape, one INFO line and no traceback.

Before, with aiohttp's compiled parser the body waited for bytes that never came until the
port's body timeout (then 504 deadline_exceeded, 10 s at the default), and with its
pure-Python parser (AIOHTTP_NO_EXTENSIONS) the read raised into the handler's branch for bugs:
500 internal and an ERROR traceback per request. Both parsers are run here: the compiled one as
installed, the pure-Python one put in its place. The port serves in process, on a port of the
OS's choice; the bad bytes are sent once the handler holds the body's turn."""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import aiohttp.web_protocol
import pytest
from aiohttp.http_parser import HttpRequestParserPy
from raw_http_kit import BOUND_S, Enrolls

from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.procedures import procedures
from fedhh.v1 import coordinator_pb2 as pb

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
HEAD = (b"POST /fedhh.v1.DeviceService/Enroll HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\n\x0a\x00\r\n")
BROKEN = {"bad chunk size": b"zz\r\nab\r\n0\r\n\r\n",
          "chunk longer than its size": b"3\r\nabcdef\r\n0\r\n\r\n"}
PREFIX = "the request does not parse: its HTTP body is malformed: "


@pytest.mark.parametrize("parser", ["compiled", "pure-Python"])
@pytest.mark.parametrize("kind", BROKEN)
def test_a_body_whose_framing_breaks_is_answered_400_once_without_a_traceback(
        parser: str, kind: str, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if parser == "pure-Python":
        monkeypatch.setattr(aiohttp.web_protocol, "HttpRequestParser", HttpRequestParserPy)

    async def scenario() -> bytes:
        # (a body timeout far above the bound below: waiting it out is the old failure)
        server = ConnectServer("connect port", procedures(DEVICES, Enrolls()), 4096, None,
                               body_timeout_s=10 * BOUND_S, large_bodies=1)
        port = await server.start("127.0.0.1", 0, insecure=True)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(HEAD)
            await writer.drain()
            while not server._large_bodies.locked():  # the handler is reading the body
                await asyncio.sleep(0.01)
            writer.write(BROKEN[kind])
            await writer.drain()
            return await asyncio.wait_for(reader.read(), BOUND_S)  # to the connection's end
        finally:
            writer.transport.abort()
            await server.close()

    with caplog.at_level(logging.INFO):
        answer = asyncio.run(scenario())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert answer.count(b"HTTP/1.1 ") == 1, answer
    assert b"X-Content-Type-Options: nosniff" in head, head
    said = json.loads(body)
    assert said["code"] == "invalid_argument" and said["message"].startswith(PREFIX), said
    ours = [r for r in caplog.records if r.name.startswith("fedhh")]
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in ours] == [
        ("INFO", "Connect call refused", None)], ours
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.records


@pytest.mark.parametrize("parser", ["compiled", "pure-Python"])
def test_a_body_broken_before_its_handler_first_runs_raises_in_the_handler(
        parser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bad chunk read in the loop iteration between aiohttp's ``start`` taking the request
    off its queue and the handler's first step (Python 3.11 runs a new task one iteration
    later): the queue is empty and no request is current, yet the body is the request's.
    Before, the error was dropped there and the read waited for the body timeout."""
    if parser == "pure-Python":
        monkeypatch.setattr(aiohttp.web_protocol, "HttpRequestParser", HttpRequestParserPy)
    from aiohttp import web

    from fedhh.rpc.http_listener import serve_app

    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        said: asyncio.Future[str] = loop.create_future()

        async def post(request: web.Request) -> web.Response:
            try:
                await request.read()
                said.set_result("read whole")
            except Exception as error:  # (the parser's error, whichever class it is)
                said.set_result(f"raised {type(error).__name__}")
            return web.Response(text="x")

        app = web.Application()
        app.router.add_post("/", post)
        served = await serve_app(app, "window", None, "127.0.0.1", 0, {})
        ours, theirs = socket.socketpair()
        transport, protocol = await loop.connect_accepted_socket(served.listener.server,
                                                                 theirs)
        try:
            protocol.data_received(b"POST / HTTP/1.1\r\nHost: x\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
            # (after start()'s wake-up, before the handler task's first step: FIFO callbacks)
            loop.call_soon(protocol.data_received, BROKEN["bad chunk size"])
            return await asyncio.wait_for(said, BOUND_S)
        finally:
            transport.abort()
            ours.close()
            await served.close()

    assert asyncio.run(scenario()) in {
        "raised BadHttpMessage", "raised RequestPayloadError"}  # (compiled, pure-Python)
