"""aiohttp's own answer to a request that does not parse carries the port's security headers,
as every other answer of the port does (``http_listener._Protocols``).

Before, a bad chunk size, Content-Length beside Transfer-Encoding, a repeated Content-Length
or Content-Type, a bad version or method was answered 400 by aiohttp's parser before any
handler or middleware ran, with neither nosniff nor no-store. Here a Connect port serves in
process, in plaintext on loopback, on a port of the OS's choice; each request is sent as raw
bytes and the answer's head is read."""

from __future__ import annotations

import asyncio

import pytest
from raw_http_kit import Enrolls, raw_head

from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.procedures import procedures
from fedhh.v1 import coordinator_pb2 as pb

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
CALL = ("POST /fedhh.v1.DeviceService/Enroll HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/proto\r\n")
MALFORMED = {
    "bad chunk size": CALL + "Transfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
    "Content-Length and Transfer-Encoding": (CALL + "Content-Length: 3\r\n"
                                             "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    "two Content-Lengths": CALL + "Content-Length: 0\r\nContent-Length: 0\r\n\r\n",
    "two Content-Types": CALL + "Content-Type: text/plain\r\nContent-Length: 0\r\n\r\n",
    "bad version": "GET / HTTP/9.x\r\nHost: localhost\r\n\r\n",
    "bad method": "G@T / HTTP/1.1\r\nHost: localhost\r\n\r\n",
}


@pytest.mark.parametrize("kind", MALFORMED)
def test_the_parsers_400_carries_the_ports_security_headers(kind: str) -> None:
    async def scenario() -> None:
        server = ConnectServer("connect port", procedures(DEVICES, Enrolls()), 4096, None)
        port = await server.start("127.0.0.1", 0, insecure=True)
        try:
            status, headers = await raw_head(port, MALFORMED[kind])
        finally:
            await server.close()
        assert status.endswith(" 400 Bad Request"), (kind, status)
        assert headers.get("X-Content-Type-Options") == "nosniff", (kind, headers)
        assert headers.get("Cache-Control") == "no-store", (kind, headers)

    asyncio.run(scenario())
