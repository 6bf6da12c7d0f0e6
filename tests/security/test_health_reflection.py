"""Health checking and reflection on a gRPC port: what a caller with no credential may open
there is bounded (``fedhh.rpc.health``; hardening, forty-first stop).

Before, grpcio's servicers held every ``Health.Watch`` call and every reflection stream for as
long as the caller liked, any number of them, and a watch kept its request: 300 watches naming
1 MB services took a coordinator from 138 to 1,148 MiB, 20,000 short watches or 20,000 silent
reflection streams to ~610 MiB, none ended. Each port (coordinator, selector, aggregator,
worker, combiner) registers them through ``serving.add_health_and_reflection``, which this
test serves in process on a port of the OS's choice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from fedhh.rpc import health, serving

# Each wait is for an answer the server gives at once (or after REFLECTION_IDLE_S, set to
# 0.2 s here): generous, for a busy machine.
BOUND_S = 30.0
SERVICE = "fedhh.v1.Example"


async def _served(scenario: Callable[[grpc.aio.Channel, health.Health], Awaitable[None]]
                  ) -> None:
    server = serving.new_server(max_receive_bytes=2 << 20)
    servicer = serving.add_health_and_reflection(server, (SERVICE,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await scenario(channel, servicer)
    finally:
        await server.stop(None)


async def _code(call: grpc.aio.Call) -> tuple[grpc.StatusCode, str]:
    """How ``call`` (a streaming call) ended, its answers read and dropped."""
    try:
        async for _ in call:
            pass
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def test_watches_are_of_the_services_served_and_capped() -> None:
    async def scenario(channel: grpc.aio.Channel, servicer: health.Health) -> None:
        stub = health_pb2_grpc.HealthStub(channel)
        # A name the process does not serve, a megabyte long: refused at once, not held.
        code, details = await asyncio.wait_for(_code(stub.Watch(
            health_pb2.HealthCheckRequest(service="x" * (1 << 20)))), BOUND_S)
        assert code == grpc.StatusCode.NOT_FOUND, (code, details)
        assert len(details) < 200 and "1048576 characters" in details, details
        # The service's own name: SERVICE_UNKNOWN until it is set, then what it is set to;
        # the process overall NOT_SERVING until then (a selector before it attaches).
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=SERVICE))
        first = await asyncio.wait_for(watch.read(), BOUND_S)
        assert first.status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        overall = await stub.Check(health_pb2.HealthCheckRequest(), timeout=BOUND_S)
        assert overall.status == health_pb2.HealthCheckResponse.NOT_SERVING
        await serving.set_serving(servicer, (SERVICE,))
        overall = await stub.Check(health_pb2.HealthCheckRequest(), timeout=BOUND_S)
        assert overall.status == health_pb2.HealthCheckResponse.SERVING
        assert (await asyncio.wait_for(watch.read(), BOUND_S)).status == \
            health_pb2.HealthCheckResponse.SERVING
        # At most MAX_WATCHES at once: one more is refused at once.
        held = [watch] + [stub.Watch(health_pb2.HealthCheckRequest())
                          for _ in range(health.MAX_WATCHES - 1)]
        for call in held[1:]:
            assert (await asyncio.wait_for(call.read(), BOUND_S)).status == \
                health_pb2.HealthCheckResponse.SERVING
        code, details = await asyncio.wait_for(
            _code(stub.Watch(health_pb2.HealthCheckRequest())), BOUND_S)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
        # Check is answered meanwhile, and a watcher gone frees its place.
        answer = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE),
                                  timeout=BOUND_S)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        held.pop().cancel()
        for _ in range(int(BOUND_S / 0.05)):  # (the server learns of the cancel in its time)
            if servicer.watching < health.MAX_WATCHES:
                break
            await asyncio.sleep(0.05)
        again = stub.Watch(health_pb2.HealthCheckRequest())
        assert (await asyncio.wait_for(again.read(), BOUND_S)).status == \
            health_pb2.HealthCheckResponse.SERVING
        for call in [*held, again]:
            call.cancel()

    asyncio.run(_served(scenario))


async def _never() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
    await asyncio.Event().wait()
    yield reflection_pb2.ServerReflectionRequest()


def test_reflection_streams_are_capped_and_each_request_is_due(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "REFLECTION_IDLE_S", 0.2)

    async def scenario(channel: grpc.aio.Channel, servicer: health.Health) -> None:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        # A client that sends requests is answered, as grpcurl is.
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        call = stub.ServerReflectionInfo(iter([ask]))
        answers = [answer async for answer in call]
        names = {s.name for s in answers[0].list_services_response.service}
        assert SERVICE in names and "grpc.health.v1.Health" in names, names
        # Silent streams: each ends DEADLINE_EXCEEDED; one beyond the cap is refused at once.
        silent = [stub.ServerReflectionInfo(_never())
                  for _ in range(health.MAX_REFLECTION_STREAMS + 1)]
        ends = await asyncio.wait_for(asyncio.gather(*(_code(c) for c in silent)), BOUND_S)
        codes = sorted(code.name for code, _ in ends)
        assert codes == ["DEADLINE_EXCEEDED"] * health.MAX_REFLECTION_STREAMS + [
            "RESOURCE_EXHAUSTED"], ends

    asyncio.run(_served(scenario))
