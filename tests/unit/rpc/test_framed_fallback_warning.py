"""A stub whose framed port cannot be reached goes on over gRPC (its fallback) and says so once:
one warning naming the port, not one a call, and again only after the port was heard from.
Before, nothing was logged: an operator could not see a firewall dropping the framed port."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Any

import pytest

from fedhh.rpc.framed.client import FramedChannel, FramedStub
from fedhh.rpc.framed.frames import HEADER, Kind
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import framed_pb2

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
BOUND_S = 10.0  # how long any awaited outcome may take on a busy machine
LOGGER = "fedhh.rpc.framed.client"


class Fallback:
    """The service's gRPC stub: GetTask answers with the device id as its retry_after_ms."""

    async def GetTask(self, request: Any, *, timeout: float | None = None,
                      metadata: Any = None) -> pb.GetTaskResponse:
        return pb.GetTaskResponse(retry_after_ms=request.device_id)


def _get_task(device_id: int) -> pb.GetTaskRequest:
    return pb.GetTaskRequest(device_id=device_id)


def _frame(stream_id: int, kind: Kind, payload: bytes) -> bytes:
    return HEADER.pack(stream_id, kind, len(payload)) + payload


def _said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_an_unreachable_port_is_told_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)

    async def main() -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{sock.getsockname()[1]}"  # (bound, not listening)
            stub = FramedStub(FramedChannel(address, None), DEVICES, ("GetTask",), Fallback())
            for device_id in (1, 2, 3):
                answer = await stub.GetTask(_get_task(device_id), timeout=BOUND_S)
                assert answer.retry_after_ms == device_id
                stub.channel._unreachable_until = 0.0  # (FALLBACK_S later: the port again)
            # (no fallback: its calls fail, which the caller sees; nothing to tell)
            alone = FramedStub(FramedChannel(address, None), DEVICES, ("GetTask",))
            with pytest.raises(Exception, match="cannot reach the framed port"):
                await alone.GetTask(_get_task(4), timeout=BOUND_S)
        warnings = _said(caplog, logging.WARNING)
        assert len(warnings) == 1, warnings
        assert warnings[0].startswith(f"the framed port {address} cannot be reached ("), warnings
        assert "its calls go over gRPC" in warnings[0] and "firewall" in warnings[0]

    asyncio.run(asyncio.wait_for(main(), 40))


def test_a_port_heard_from_again_is_told_again_when_it_is_lost(
        caplog: pytest.LogCaptureFixture) -> None:
    """A port that closes at once (unreachable: warned), then answers (told at INFO), then is
    gone (warned again)."""
    caplog.set_level(logging.INFO, LOGGER)
    answering = asyncio.Event()

    async def port(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not answering.is_set():
            writer.transport.abort()
            return
        await reader.read(1)  # (the call's preface and opening have come)
        end = framed_pb2.FramedEnd(code=0).SerializeToString()
        writer.write(_frame(1, Kind.EVENT, pb.GetTaskResponse(retry_after_ms=7)
                            .SerializeToString()) + _frame(1, Kind.END, end))
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(port, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        stub = FramedStub(FramedChannel(address, None), DEVICES, ("GetTask",), Fallback())
        try:
            assert (await stub.GetTask(_get_task(1), timeout=BOUND_S)).retry_after_ms == 1
            assert len(_said(caplog, logging.WARNING)) == 1
            assert "closed the connection before sending anything" in \
                _said(caplog, logging.WARNING)[0]
            answering.set()
            stub.channel._unreachable_until = 0.0  # (FALLBACK_S later: the port again)
            assert (await stub.GetTask(_get_task(2), timeout=BOUND_S)).retry_after_ms == 7
            assert _said(caplog, logging.INFO) == [
                f"the framed port {address} answers again: its calls go over it"]
        finally:
            server.close()
            await server.wait_closed()
        await stub.close()
        assert (await stub.GetTask(_get_task(3), timeout=BOUND_S)).retry_after_ms == 3
        warnings = _said(caplog, logging.WARNING)
        assert len(warnings) == 2 and warnings[1].startswith(
            f"the framed port {address} cannot be reached ("), warnings

    asyncio.run(asyncio.wait_for(main(), 40))


def test_a_name_that_does_not_resolve_is_told_so_not_a_firewall(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A port named by a name only another network knows (compose's `aggregator`, given to a
    device outside it): the warning says the name does not resolve. Before, it blamed a
    firewall that lets only the gRPC port through, whose name fails alike."""
    caplog.set_level(logging.INFO, LOGGER)
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "aggregator":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    async def main() -> None:
        channel = FramedChannel("aggregator:7101", ssl.create_default_context())
        stub = FramedStub(channel, DEVICES, ("GetTask",), Fallback())
        assert (await stub.GetTask(_get_task(5), timeout=BOUND_S)).retry_after_ms == 5
        await stub.close()

    asyncio.run(asyncio.wait_for(main(), 40))
    [warning] = _said(caplog, logging.WARNING)
    assert warning.startswith("the framed port aggregator:7101 cannot be reached ("), warning
    assert warning.endswith("the name aggregator does not resolve here"), warning
    assert "firewall" not in warning
