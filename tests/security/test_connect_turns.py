"""At a Connect port where a method's large bodies are read only for callers its head check
knows (the aggregator's masked vector), large bodies of methods without one hold at most a
quarter of the port's turns (``fedhh.rpc.connect``; hardening, forty-first stop).

Before, a body of undeclared length to any method took one of the turns before a byte of it
was read: outsiders trickling chunked bodies to a method with no head check (the aggregator's
AwaitStage) held every turn for the body timeout (266 s at the aggregator's defaults), and an
admitted device's masked vector waited past its call's deadline. Here a port of 4 turns serves
the coordinator's DeviceService in process (plaintext on loopback, a port of the OS's choice),
Enroll standing for the head-checked method and GetTask for one without."""

from __future__ import annotations

import asyncio
import contextlib

from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.procedures import procedures
from fedhh.v1 import coordinator_pb2 as pb

BOUND_S = 30.0  # (the admitted upload is read at once: generous, for a busy machine)
DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
TURNS = 4


class _Service:
    async def Enroll(self, request: pb.EnrollRequest, context: object) -> pb.EnrollResponse:
        return pb.EnrollResponse(device_id=len(request.label))

    async def GetTask(self, request: pb.GetTaskRequest, context: object) -> pb.GetTaskResponse:
        return pb.GetTaskResponse()


def _caller(prefix: bytes) -> str | None:
    return "device 1" if prefix else None  # (known from the first byte)


async def _trickle(port: int, stop: asyncio.Event) -> None:
    """A chunked GetTask body, a byte at a time until ``stop``."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /fedhh.v1.DeviceService/GetTask HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        while not stop.is_set():
            writer.write(b"1\r\n\x08\r\n")
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)
    finally:
        writer.transport.abort()


async def _upload(port: int, label: str) -> bytes:
    """The status line and body of an Enroll of ``len(label)`` bytes, deadline BOUND_S."""
    body = pb.EnrollRequest(label=label).SerializeToString()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /fedhh.v1.DeviceService/Enroll HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/proto\r\nConnect-Timeout-Ms: %d\r\n"
                 b"Content-Length: %d\r\n\r\n" % (BOUND_S * 1000, len(body)) + body)
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2 * BOUND_S)
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        return head.split(b"\r\n")[0] + b" " + await reader.readexactly(length)
    finally:
        writer.transport.abort()


def test_bodies_of_unknown_callers_leave_turns_to_known_ones() -> None:
    async def scenario() -> None:
        server = ConnectServer("connect port", procedures(
            DEVICES, _Service(), head_checks={"Enroll": _caller}), 1 << 20, None,
            body_timeout_s=120.0, large_bodies=TURNS)
        port = await server.start("127.0.0.1", 0, insecure=True)
        stop = asyncio.Event()
        outsiders = [asyncio.create_task(_trickle(port, stop)) for _ in range(TURNS)]
        try:
            for _ in range(int(BOUND_S / 0.05)):  # (until every outsider's body has its turn
                # or waits for one; before, they took every turn)
                unchecked = getattr(server, "_unchecked_bodies", None)
                waiting = len(getattr(unchecked, "_waiters", None) or ())
                if waiting == TURNS - 1 or server._large_bodies.locked():
                    break
                await asyncio.sleep(0.05)
            answer = await _upload(port, "x" * (100 << 10))
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            assert pb.EnrollResponse.FromString(answer.split(b" ", 3)[3]).device_id == 100 << 10
        finally:
            stop.set()
            await asyncio.gather(*outsiders, return_exceptions=True)
            await server.close()

    asyncio.run(scenario())
