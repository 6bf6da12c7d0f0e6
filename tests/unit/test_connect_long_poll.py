"""A Connect call is cut by its own deadline only (outside probe, thirty-sixth stop): the
session's default timeout, aiohttp's 300 s for the whole request, cut `fedhh device --connect`'s
30-minute GetTask long-poll every 5 minutes, each cut a failed check-in and a backoff. Here
aiohttp's default is shortened to 0.05 s and the port holds the long-poll 0.3 s: the old client
failed it (the server and the client share one event loop, so the client's timer, due first,
always fires first). A connection that goes silent still fails, UNAVAILABLE, once the answer is
overdue (the wait it asked for plus a grace), instead of hanging for ever."""

from __future__ import annotations

import asyncio

import aiohttp
import aiohttp.client
import grpc
import pytest
from aiohttp import web

from fedhh.rpc import connect_client
from fedhh.rpc.connect import CONTENT_TYPE
from fedhh.rpc.connect_client import ConnectChannel, ConnectStub
from fedhh.v1 import coordinator_pb2 as pb

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
HOLD_S = 0.3  # how long the port holds the long-poll; aiohttp's default is made far shorter
GRACE_S = 0.15  # the grace past an answer's due time, shortened


async def holding_port(hold_s: float) -> tuple[web.AppRunner, int]:
    async def get_task(request: web.Request) -> web.Response:
        asked = pb.GetTaskRequest.FromString(await request.read())
        assert asked.wait_ms > hold_s * 1000
        await asyncio.sleep(hold_s)  # the long-poll's wait, as the coordinator holds it
        return web.Response(body=pb.GetTaskResponse().SerializeToString(),
                            content_type=CONTENT_TYPE)

    app = web.Application()
    app.router.add_post("/fedhh.v1.DeviceService/GetTask", get_task)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, port


def test_a_long_poll_outlives_aiohttps_default_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiohttp.client, "DEFAULT_TIMEOUT",
                        aiohttp.ClientTimeout(total=0.05, sock_connect=0.05, sock_read=0.05))

    async def main() -> pb.GetTaskResponse:
        runner, port = await holding_port(HOLD_S)
        stub = ConnectStub(ConnectChannel(f"127.0.0.1:{port}", insecure=True), DEVICES)
        try:
            # as the fleet asks: no timeout, a 30-minute wait
            return await stub.GetTask(pb.GetTaskRequest(device_id=7, wait_ms=30 * 60_000))
        finally:
            await stub.close()
            await runner.cleanup()

    assert asyncio.run(main()) == pb.GetTaskResponse()


@pytest.mark.parametrize("wait_ms", [0, 100])
def test_a_silent_connection_fails_once_its_answer_is_overdue(
        monkeypatch: pytest.MonkeyPatch, wait_ms: int) -> None:
    """A port that takes the request and never answers (a dead peer behind a proxy): the call
    fails UNAVAILABLE after the wait it asked for plus the grace (or, asking no wait, after
    DEFAULT_READ_S), both shortened here; before, only aiohttp's 300 s ended it (and with the
    default lifted, nothing would)."""
    monkeypatch.setattr(connect_client, "HOLD_GRACE_S", GRACE_S)
    monkeypatch.setattr(connect_client, "DEFAULT_READ_S", GRACE_S)
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # reads nothing more, answers nothing, never closes

    async def main() -> tuple[grpc.aio.AioRpcError, float]:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        stub = ConnectStub(ConnectChannel(f"127.0.0.1:{port}", insecure=True), DEVICES)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await asyncio.wait_for(
                    stub.GetTask(pb.GetTaskRequest(device_id=7, wait_ms=wait_ms)), 20.0)
            return caught.value, loop.time() - started
        finally:
            await stub.close()
            for writer in held:
                writer.close()
            server.close()

    error, seconds = asyncio.run(main())
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    assert "went silent" in (error.details() or "")
    assert seconds >= wait_ms / 1000 + GRACE_S - 0.05  # not before the answer was due


def test_a_callers_deadline_still_cuts_the_call() -> None:
    async def main() -> grpc.aio.AioRpcError:
        runner, port = await holding_port(HOLD_S)
        stub = ConnectStub(ConnectChannel(f"127.0.0.1:{port}", insecure=True), DEVICES)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetTask(pb.GetTaskRequest(device_id=7, wait_ms=30 * 60_000),
                                   timeout=0.1)
            return caught.value
        finally:
            await stub.close()
            await runner.cleanup()

    assert asyncio.run(main()).code() == grpc.StatusCode.DEADLINE_EXCEEDED
