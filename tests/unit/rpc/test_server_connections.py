"""A gRPC port's connections (``fedhh.rpc.serving.server_options``): at most a quarter of the
process's open-file limit, one more closed as it arrives, so that connections alone cannot take
every file the service may open (gRPC has no cap of its own); and the handshakes within 10 s,
not gRPC's 120 s."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
import uvloop
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fedhh.rpc import serving

BOUND_S = 20.0


def test_a_port_holds_a_quarter_of_the_open_file_limit_in_connections(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a limit of 12 files (as if), the port holds 3 connections: of 5 that send
    nothing, 2 are closed at once while 3 are held; once those go, a client is served."""
    monkeypatch.setattr(serving, "open_file_limit", lambda: 12)
    options = dict(serving.server_options())
    assert options["grpc.max_allowed_incoming_connections"] == 3
    assert options["grpc.server_handshake_timeout_ms"] == 10_000

    async def scenario() -> None:
        server = serving.new_server()
        health = serving.add_health_and_reflection(server, ())
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        await serving.set_serving(health, ())
        writers = []
        try:
            ends = []
            for _ in range(5):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writers.append(writer)
                ends.append(asyncio.create_task(reader.read()))
            deadline = time.monotonic() + BOUND_S
            while sum(end.done() for end in ends) < 2:
                assert time.monotonic() < deadline, sum(end.done() for end in ends)
                await asyncio.wait([end for end in ends if not end.done()], timeout=0.1)
            assert sum(end.done() for end in ends) == 2
            for writer in writers:
                writer.transport.abort()
            await asyncio.gather(*ends, return_exceptions=True)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                answer = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=BOUND_S, wait_for_ready=True)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            for writer in writers:
                writer.transport.abort()
            await server.stop(None)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(asyncio.wait_for(scenario(), 60))
