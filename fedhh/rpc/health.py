"""The gRPC ports' health checking (``grpc.health.v1``) and reflection: the calls any caller
may make on every service's gRPC port with no credential, each bounded.

grpcio's own servicers held every ``Health.Watch`` call and every ``ServerReflectionInfo``
stream for as long as the caller liked, any number of them, and a watch kept its request (a
service name of up to the receive cap) for its life, so that callers with no credential could
make a service hold what they liked (hardening, forty-first stop): 300 watches naming 1 MB
services took a coordinator from 138 to 1,148 MiB, 20,000 watches with short names, or 20,000
reflection streams that sent nothing, from 139 to ~610 MiB, and none ended. Now:

- ``Check`` answers as grpcio's did (the status of a service that set one, else NOT_FOUND);
- ``Watch`` is served for the service names a process reports (``names``, and ``""``, the
  process overall) and at most ``MAX_WATCHES`` at once per process; another name is NOT_FOUND
  at once (grpcio's answered SERVICE_UNKNOWN and held the call for ever: a process's names are
  fixed as it starts, so such a watch would never see a status), one more watch
  RESOURCE_EXHAUSTED at once. Nothing of fedhh's watches (``fedhh health``, the probes and the
  aggregation service's pool ask with ``Check``), so a caller holding every watch keeps only
  other watchers out;
- at most ``MAX_REFLECTION_STREAMS`` reflection streams at once per process (one more
  RESOURCE_EXHAUSTED at once), each ended DEADLINE_EXCEEDED when its client sends no request
  within ``REFLECTION_IDLE_S`` of the stream's start or of its last request (a tool such as
  grpcurl sends its requests at once, then closes). A caller that opens streams, sends
  requests and does not read the answers holds its places until it leaves: it keeps only other
  reflection clients out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from fedhh.errors import shown

__all__ = ["MAX_REFLECTION_STREAMS", "MAX_WATCHES", "REFLECTION_IDLE_S", "Health",
           "Reflection"]

MAX_WATCHES = 64
MAX_REFLECTION_STREAMS = 16
REFLECTION_IDLE_S = 10.0


class Health(health_pb2_grpc.HealthServicer):
    """The process's health: ``""`` (the process overall) NOT_SERVING until ``set`` (the
    service's ``serving.set_serving``, once it serves), each of ``names`` NOT_FOUND to
    ``Check`` until then. (grpcio's servicer had ``""`` SERVING from the port's start: a
    selector, whose port starts before it attaches to its leader, answered SERVING unattached,
    where its health check is to read healthy only once attached.)"""

    def __init__(self, names: Iterable[str]) -> None:
        self._status: dict[str, health_pb2.HealthCheckResponse.ServingStatus] = {
            "": health_pb2.HealthCheckResponse.NOT_SERVING}
        self._watchable = frozenset(["", *names])
        self._changed = asyncio.Event()
        self.watching = 0

    async def set(self, name: str,
                  status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        """Report ``status`` for ``name`` (one of the names given, or ``""``)."""
        if name not in self._watchable:
            raise ValueError(f"health: {name!r} is not one of this process's services")
        self._status[name] = status
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def Check(self, request: health_pb2.HealthCheckRequest, context: Any
                    ) -> health_pb2.HealthCheckResponse:
        status = self._status.get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"no service {shown(request.service)} here")
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: Any) -> None:
        name = request.service
        if name not in self._watchable:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no service {shown(name)} here "
                                f"(its status would never be known)")
        if self.watching >= MAX_WATCHES:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"at most {MAX_WATCHES} health watches at once here; "
                                f"ask with Check")
        self.watching += 1
        try:
            last = None
            while True:
                changed = self._changed
                status = self._status.get(name, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
                if status != last:
                    await context.write(health_pb2.HealthCheckResponse(status=status))
                    last = status
                await changed.wait()
        finally:
            self.watching -= 1


class Reflection(reflection_pb2_grpc.ServerReflectionServicer):
    """grpcio's reflection of ``names`` (with health and reflection themselves), its streams
    bounded in number and in the wait for each request."""

    def __init__(self, names: Iterable[str]) -> None:
        self._served = reflection.aio.ReflectionServicer(
            [*names, health.SERVICE_NAME, reflection.SERVICE_NAME])
        self.open = 0

    async def ServerReflectionInfo(
            self, request_iterator: AsyncIterable[reflection_pb2.ServerReflectionRequest],
            context: Any) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        if self.open >= MAX_REFLECTION_STREAMS:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"at most {MAX_REFLECTION_STREAMS} reflection streams at once "
                                f"here; try again later")
        self.open += 1
        try:
            async for response in self._served.ServerReflectionInfo(
                    _each_due(request_iterator, context), context):
                yield response
        finally:
            self.open -= 1


async def _each_due(requests: AsyncIterable[Any], context: Any) -> AsyncIterator[Any]:
    """``requests``, each due within ``REFLECTION_IDLE_S`` of the one before (or the stream's
    start), else the stream ends DEADLINE_EXCEEDED."""
    iterator = aiter(requests)
    while True:
        late = False
        try:
            async with asyncio.timeout(REFLECTION_IDLE_S):
                request = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            late = True  # (aborted outside the except block: no exception chained into a cycle)
        if late:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"no reflection request within {REFLECTION_IDLE_S:g} s")
        yield request
