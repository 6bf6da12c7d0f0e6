"""The Python device's Connect client reads an answer at most ``MAX_ANSWER_BYTES`` far, as its
gRPC channels refuse a message over their cap (``grpc.max_receive_message_length``): one that
declares more fails RESOURCE_EXHAUSTED unread, one that streams past the cap fails there.
Before, aiohttp read an answer of any size into memory (the web device's ``cappedFetch`` does
the same, clients/web/test/bad_answers.test.ts). The cap is shortened here to 1,000 bytes.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from aiohttp import web

from fedhh.rpc import connect_client
from fedhh.rpc.connect import CONTENT_TYPE
from fedhh.rpc.connect_client import ConnectChannel, ConnectStub
from fedhh.v1 import coordinator_pb2 as pb

CAP = 1000
CHUNKS = 1600  # of 64 KiB


async def answering_port(sent: list[int]) -> tuple[web.AppRunner, int]:
    """A port whose GetTask answers by the request's ``wait_ms``: 0 a small task answer,
    1 a declared length over the cap, 2 a chunked body streamed far past it (``sent``
    counts the chunks it got written)."""

    async def get_task(request: web.Request) -> web.StreamResponse:
        mode = pb.GetTaskRequest.FromString(await request.read()).wait_ms
        if mode == 0:
            body = pb.GetTaskResponse(retry_after_ms=7).SerializeToString()
            return web.Response(body=body, content_type=CONTENT_TYPE)
        if mode == 1:
            return web.Response(body=b"\0" * (CAP + 1), content_type=CONTENT_TYPE)
        answer = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE})
        answer.enable_chunked_encoding()
        await answer.prepare(request)
        try:
            for _ in range(CHUNKS):  # 100 MiB in all, if it were read
                await answer.write(bytes(64 * 1024))
                sent.append(1)
        except (ConnectionError, asyncio.CancelledError):
            pass
        return answer

    app = web.Application()
    app.router.add_post("/fedhh.v1.DeviceService/GetTask", get_task)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


def test_answers_over_the_cap_are_refused_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect_client, "MAX_ANSWER_BYTES", CAP)

    async def main() -> tuple[pb.GetTaskResponse, list[grpc.aio.AioRpcError], int]:
        sent: list[int] = []
        runner, port = await answering_port(sent)
        stub = ConnectStub(ConnectChannel(f"127.0.0.1:{port}", insecure=True),
                           pb.DESCRIPTOR.services_by_name["DeviceService"])
        errors: list[grpc.aio.AioRpcError] = []
        try:
            small = await stub.GetTask(pb.GetTaskRequest(wait_ms=0), timeout=30)
            for mode in (1, 2):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.GetTask(pb.GetTaskRequest(wait_ms=mode), timeout=30)
                errors.append(caught.value)
        finally:
            await stub.close()
            await runner.cleanup()
        return small, errors, len(sent)

    small, errors, chunks = asyncio.run(main())
    assert small.retry_after_ms == 7
    assert [e.code() for e in errors] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2
    assert "is 1001 bytes, over the device's cap of 1000 bytes" in (errors[0].details() or "")
    assert "is over 1000 bytes" in (errors[1].details() or "")
    # (the writes stop once the client closed; loopback's socket buffers hold some MB at most)
    assert chunks < CHUNKS, f"{chunks} of {CHUNKS} chunks written: the answer was read whole"


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000,
                                  b'{"code": "internal", "message": ' + b"[" * 100_000
                                  + b"]" * 100_000 + b"}"])
def test_an_error_body_nested_too_deep_is_its_http_status(body: bytes) -> None:
    """Before, json.loads' RecursionError escaped the client and ended the device process."""
    assert connect_client.error_of_answer(503, "application/json", body) == (
        grpc.StatusCode.UNAVAILABLE, "HTTP 503")


def test_an_error_body_gives_its_code_and_message() -> None:
    assert connect_client.error_of_answer(
        400, "application/json", b'{"code": "invalid_argument", "message": "no"}') == (
        grpc.StatusCode.INVALID_ARGUMENT, "no")
