"""A gRPC port's idle connections are sent away (``serving.MAX_CONNECTION_IDLE_MS``;
hardening, forty-first stop), so that connections alone cannot hold the port's connection cap.

Before, gRPC kept a connection with no call for ever: under a limit of 12 open files (a port
of 3 connections), 3 clients that made one call each and then nothing held every place, and a
newcomer waited 10 s and more without being served, for as long as they stayed. Served in
process on a port of the OS's choice, the idle time 0.5 s here."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fedhh.rpc import serving

BOUND_S = 30.0  # (the newcomer is served about 0.5 s in: generous, for a busy machine)
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]  # (each channel its own connection)


def test_idle_connections_leave_their_places_to_newcomers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert dict(serving.server_options())["grpc.max_connection_idle_ms"] == 120_000
    monkeypatch.setattr(serving, "open_file_limit", lambda: 12)
    monkeypatch.setattr(serving, "MAX_CONNECTION_IDLE_MS", 500)

    async def check(channel: grpc.aio.Channel) -> int:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=BOUND_S, wait_for_ready=True)
        return int(answer.status)

    async def scenario() -> None:
        server = serving.new_server()
        health = serving.add_health_and_reflection(server, ())
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        await serving.set_serving(health, ())
        address = f"127.0.0.1:{port}"
        idle = [grpc.aio.insecure_channel(address, options=OWN_CONNECTION) for _ in range(3)]
        try:
            for channel in idle:  # each holds a place of the 3, then makes no call
                assert await check(channel) == health_pb2.HealthCheckResponse.SERVING
            async with grpc.aio.insecure_channel(address, options=OWN_CONNECTION) as newcomer:
                assert await check(newcomer) == health_pb2.HealthCheckResponse.SERVING
        finally:
            for channel in idle:
                await channel.close()
            await server.stop(None)

    asyncio.run(scenario())
