"""A status code no ``grpc.StatusCode`` has is read as UNKNOWN by each client of the device
ports, its words kept: the framed channel's as the Connect client's (an unknown Connect code)
and gRPC's own ("Server sent unknown code ...")."""

from __future__ import annotations

import asyncio
import contextlib
import json

import grpc
import pytest
import uvloop

from fedhh.rpc.connect_client import error_of_answer
from fedhh.rpc.framed.client import FramedChannel
from fedhh.rpc.framed.frames import HEADER, PREFACE, FrameSplitter, Kind
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import framed_pb2

BOUND_S = 20.0  # how long the call may take on a busy machine
GET_TASK = "/fedhh.v1.DeviceService/GetTask"
UNKNOWN_CODE = 99


async def framed_answer() -> tuple[grpc.StatusCode, str]:
    """A GetTask on a framed port that ends every call with ``UNKNOWN_CODE``."""

    async def port(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        splitter = FrameSplitter(1 << 20)
        assert await reader.readexactly(len(PREFACE)) == PREFACE
        while True:
            data = await reader.read(1 << 16)
            if not data:
                return
            for stream_id, kind, _ in splitter.feed(data):
                if kind == Kind.OPEN:
                    end = framed_pb2.FramedEnd(code=UNKNOWN_CODE, details="a newer port's code")
                    payload = end.SerializeToString()
                    writer.write(HEADER.pack(stream_id, Kind.END, len(payload)) + payload)

    server = await asyncio.start_server(port, "127.0.0.1", 0)
    channel = FramedChannel(f"127.0.0.1:{server.sockets[0].getsockname()[1]}", None)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await channel.unary(GET_TASK, pb.GetTaskRequest(device_id=1), pb.GetTaskResponse,
                                timeout=BOUND_S)
        return failed.value.code(), failed.value.details() or ""
    finally:
        await channel.close()
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()


def test_the_framed_channel_reads_an_unknown_code_as_unknown() -> None:
    """Before, the framed channel ended such a call INTERNAL "an end that does not parse",
    the port's words lost, where the Connect client and gRPC's say UNKNOWN."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        code, details = runner.run(asyncio.wait_for(framed_answer(), 2 * BOUND_S))
    assert (code, details) == (grpc.StatusCode.UNKNOWN,
                               f"the port sent unknown code {UNKNOWN_CODE}: a newer port's code")


def test_the_connect_client_reads_an_unknown_code_as_unknown() -> None:
    body = json.dumps({"code": "a_newer_code", "message": "a newer port's code"}).encode()
    assert error_of_answer(500, "application/json", body) == (grpc.StatusCode.UNKNOWN,
                                                              "a newer port's code")
