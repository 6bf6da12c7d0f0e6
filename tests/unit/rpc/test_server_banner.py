"""No answer of an aiohttp port (``fedhh.rpc.http_listener.serve_app``: the dashboard, the
Connect ports, the metrics endpoint) names the software's versions. Before, every one carried
aiohttp's ``Server: Python/3.11 aiohttp/3.14.5``: a handler's answer, a route's 404, a handler's
uncaught error and the parser's own 400 alike. Each request is sent as raw bytes to a port of
the OS's choice and the answer's head is read."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from raw_http_kit import Enrolls, raw_head

from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.http_listener import SERVER, serve_app
from fedhh.rpc.observability import start_metrics
from fedhh.rpc.procedures import procedures
from fedhh.v1 import coordinator_pb2 as pb

REQUESTS = {
    "a handler's answer": "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "a route's 404": "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
    "a handler's uncaught error": "GET /fails HTTP/1.1\r\nHost: x\r\n\r\n",
    "the parser's 400": "G@T / HTTP/1.1\r\nHost: x\r\n\r\n",
}

STATUS = {"a handler's answer": 200, "a route's 404": 404, "a handler's uncaught error": 500,
          "the parser's 400": 400}


@pytest.mark.parametrize("kind", REQUESTS)
def test_no_answer_names_the_softwares_versions(kind: str) -> None:
    async def scenario() -> None:
        app = web.Application()

        async def hello(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def fails(request: web.Request) -> web.Response:
            raise RuntimeError("a handler's bug")

        app.router.add_get("/", hello)
        app.router.add_get("/fails", fails)
        served = await serve_app(app, "test port", None, "127.0.0.1", 0,
                                 {"X-Content-Type-Options": "nosniff"})
        try:
            status, headers = await raw_head(served.port, REQUESTS[kind])
        finally:
            await served.close()
        assert int(status.split()[1]) == STATUS[kind], (kind, status)
        assert headers.get("Server") == SERVER == "fedhh", (kind, headers)
        assert headers.get("X-Content-Type-Options") == "nosniff", (kind, headers)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_the_connect_port_and_the_metrics_endpoint_send_no_banner() -> None:
    devices = pb.DESCRIPTOR.services_by_name["DeviceService"]

    async def scenario() -> None:
        connect = ConnectServer("connect port", procedures(devices, Enrolls()), 4096, None)
        connect_port = await connect.start("127.0.0.1", 0, insecure=True)
        metrics = await start_metrics(0, "127.0.0.1", None, has_certificate=False)
        assert metrics.port is not None
        try:
            for port in (connect_port, metrics.port):
                for request in (REQUESTS["a route's 404"], REQUESTS["the parser's 400"]):
                    _, headers = await raw_head(port, request)
                    assert headers.get("Server") == "fedhh", (port, request, headers)
        finally:
            await metrics.close()
            await connect.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
