"""A Connect call with a compressed body is refused alike whatever its Content-Encoding: 501
``unimplemented``, "compressed requests are not accepted (identity only)", its body never read
nor inflated. Before, aiohttp's parser inflated bodies before any handler looked, and refused
itself an encoding it had no library for (br, zstd where Brotli and backports.zstd are not
installed, as in fedhh's environment): 400 ``invalid_argument``, "the request does not parse:
Can not decode content-encoding: brotli (br). Please install `Brotli`", advice to the caller
about the server's libraries, where gzip got the port's own 501. The port serves in process,
on a port of the OS's choice."""

from __future__ import annotations

import asyncio
import json

import pytest
from raw_http_kit import BOUND_S, Enrolls

from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.procedures import procedures
from fedhh.v1 import coordinator_pb2 as pb

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
BODY = pb.EnrollRequest(label="x").SerializeToString()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "compress", "x-none"])
def test_every_content_encoding_but_identity_is_unimplemented(encoding: str) -> None:
    async def scenario() -> bytes:
        server = ConnectServer("connect port", procedures(DEVICES, Enrolls()), 4096, None)
        port = await server.start("127.0.0.1", 0, insecure=True)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"POST /fedhh.v1.DeviceService/Enroll HTTP/1.1\r\nHost: localhost\r\n"
                         b"Content-Type: application/proto\r\nContent-Encoding: "
                         + encoding.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(BODY)
                         + BODY)
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            return head + await asyncio.wait_for(reader.readexactly(length), BOUND_S)
        finally:
            writer.transport.abort()
            await server.close()

    answer = asyncio.run(scenario())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 501 "), answer[:400]
    assert json.loads(body) == {"code": "unimplemented", "message":
                                "compressed requests are not accepted (identity only)"}, body
