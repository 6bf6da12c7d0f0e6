"""A request whose head aiohttp's own parser refuses (a bad request line, a Content-Length that
is no number, Content-Length beside Transfer-Encoding) is answered on a Connect port in
Connect's error shape: 400 with ``{"code": "invalid_argument", "message": "the request does
not parse: ..."}``, as the port refuses a body that does not parse. Before, it was aiohttp's
plain-text "400 Bad Request", which a Connect client reads by its HTTP status alone: 400 is
``internal`` in the Connect protocol's table (our client said INTERNAL, "HTTP 400"), a fault of
the server's for a request of the sender's. Other aiohttp ports (metrics, dashboard) keep
aiohttp's answer. Ports of the OS's choice, in process."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from aiohttp import web
from raw_http_kit import Enrolls

from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.connect_client import error_of_answer
from fedhh.rpc.http_listener import serve_app
from fedhh.rpc.procedures import procedures
from fedhh.v1 import coordinator_pb2 as pb

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
PATH = b"/fedhh.v1.DeviceService/Enroll"
BAD_HEADS = {
    "bad request line": b"POST " + PATH + b" HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    "Content-Length not a number": b"POST " + PATH + b" HTTP/1.1\r\nHost: x\r\n"
                                   b"Content-Type: application/proto\r\nContent-Length: ab\r\n\r\n",
    "Content-Length and Transfer-Encoding": b"POST " + PATH + b" HTTP/1.1\r\nHost: x\r\n"
                                            b"Content-Length: 2\r\n"
                                            b"Transfer-Encoding: chunked\r\n\r\n",
}
BOUND_S = 30


async def _answer(port: int, head: bytes) -> tuple[bytes, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), BOUND_S)  # aiohttp closes after it
    finally:
        writer.transport.abort()
    head_, _, body = answer.partition(b"\r\n\r\n")
    return head_, body


@pytest.mark.parametrize("kind", BAD_HEADS)
def test_a_head_aiohttp_refuses_is_answered_in_connects_error_shape(kind: str) -> None:
    async def scenario() -> tuple[bytes, bytes]:
        server = ConnectServer("connect port", procedures(DEVICES, Enrolls()), 4096, None)
        port = await server.start("127.0.0.1", 0, insecure=True)
        try:
            return await _answer(port, BAD_HEADS[kind])
        finally:
            await server.close()

    head, body = asyncio.run(scenario())
    assert head.split(b" ")[1] == b"400", head
    assert b"Content-Type: application/json" in head, head
    assert b"X-Content-Type-Options: nosniff" in head and b"Cache-Control: no-store" in head
    said = json.loads(body)
    assert said["code"] == "invalid_argument", said
    assert said["message"].startswith("the request does not parse: "), said
    assert len(said["message"]) <= len("the request does not parse: ") + 200
    code, details = error_of_answer(400, "application/json", body)
    assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, said["message"])


def test_other_aiohttp_ports_keep_aiohttps_own_answer() -> None:
    async def scenario() -> tuple[bytes, bytes]:
        served = await serve_app(web.Application(), "metrics endpoint", None, "127.0.0.1", 0,
                                 {"X-Content-Type-Options": "nosniff"})
        try:
            return await _answer(served.port, BAD_HEADS["bad request line"])
        finally:
            await served.close()

    head, body = asyncio.run(scenario())
    assert head.split(b" ")[1] == b"400" and b"Content-Type: text/plain" in head, head
    assert b"X-Content-Type-Options: nosniff" in head, head
    assert body.startswith(b"Bad status line"), body  # aiohttp's words, not JSON
