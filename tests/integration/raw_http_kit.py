"""A raw HTTP/1.1 exchange with an aiohttp port (``fedhh.rpc.http_listener.serve_app``): the
request sent as bytes, so that one the client library would never send (a bad method, two
Content-Lengths) reaches the parser; and a Connect servicer for a port that needs one."""

from __future__ import annotations

import asyncio

from fedhh.v1 import coordinator_pb2 as pb

BOUND_S = 30.0  # (each answer comes at once: generous, for a busy machine)


async def raw_head(port: int, request: str) -> tuple[str, dict[str, str]]:
    """The status line (``HTTP/1.1 200 OK``) and the headers answering ``request`` on
    127.0.0.1:``port``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request.encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
    finally:
        writer.transport.abort()
    status, *lines = head.decode("latin-1").split("\r\n")[:-2]
    return status, dict(line.split(": ", 1) for line in lines)


class Enrolls:
    """The DeviceService calls a Connect port serves: every device is device 7."""

    async def Enroll(self, request: pb.EnrollRequest, context: object) -> pb.EnrollResponse:
        return pb.EnrollResponse(device_id=7)

    async def GetTask(self, request: pb.GetTaskRequest, context: object) -> pb.GetTaskResponse:
        return pb.GetTaskResponse()
