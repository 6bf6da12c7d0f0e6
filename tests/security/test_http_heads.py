"""A request head on the aiohttp ports (the Connect port, the dashboard, the metrics endpoint)
is at most ``HEAD_LIMITS``: 48 lines of at most 8 KiB (hardening, forty-first stop).

Before, aiohttp's default of 128 lines let each head hold 1 MiB, parsed and kept while its body
was awaited: 500 connections with 120 such lines to the coordinator's Connect port took it from
148 to 1,140 MiB at the peak. Here a Connect port serves in process, in plaintext on loopback,
on a port of the OS's choice."""

from __future__ import annotations

import asyncio

from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.http_listener import HEAD_LIMITS
from fedhh.rpc.procedures import procedures
from fedhh.v1 import coordinator_pb2 as pb

BOUND_S = 30.0  # (each answer comes at once: generous, for a busy machine)
DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]


class _Enrolls:
    async def Enroll(self, request: pb.EnrollRequest, context: object) -> pb.EnrollResponse:
        return pb.EnrollResponse(device_id=7)

    async def GetTask(self, request: pb.GetTaskRequest, context: object) -> pb.GetTaskResponse:
        return pb.GetTaskResponse()


async def _status(port: int, lines: int) -> bytes:
    """The status line answering an Enroll whose head has ``lines`` more lines of 8,000
    bytes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = pb.EnrollRequest(label="x").SerializeToString()
    head = ("POST /fedhh.v1.DeviceService/Enroll HTTP/1.1\r\nHost: localhost\r\n"
            f"Content-Type: application/proto\r\nContent-Length: {len(body)}\r\n"
            + "".join(f"X-Pad-{i}: {'a' * 8000}\r\n" for i in range(lines)) + "\r\n")
    try:
        writer.write(head.encode() + body)
        return (await asyncio.wait_for(reader.readline(), BOUND_S)).strip()
    finally:
        writer.transport.abort()


def test_a_head_of_more_lines_than_the_limit_is_refused() -> None:
    async def scenario() -> None:
        server = ConnectServer("connect port", procedures(DEVICES, _Enrolls()), 4096, None)
        port = await server.start("127.0.0.1", 0, insecure=True)
        try:
            room = HEAD_LIMITS["max_headers"] - 4  # (Host, Content-Type, Content-Length)
            assert (await _status(port, room)).startswith(b"HTTP/1.1 200"), room
            assert (await _status(port, HEAD_LIMITS["max_headers"])).endswith(
                b" 400 Bad Request")
            assert (await _status(port, 120)).endswith(b" 400 Bad Request")
        finally:
            await server.close()

    asyncio.run(scenario())
