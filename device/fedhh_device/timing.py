"""Client interceptors that time every RPC and count request bytes, per method, for the load
test's per-stage latency percentiles and bytes per device."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

import grpc


class CallStats:
    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.bytes_sent: dict[str, int] = defaultdict(int)

    def record(self, method: str, started: float, sent: int) -> None:
        name = method.rsplit("/", 1)[-1]
        self.seconds[name].append(time.perf_counter() - started)
        self.bytes_sent[name] += sent


def _size(message: Any) -> int:
    return int(message.ByteSize()) if hasattr(message, "ByteSize") else 0


class UnaryTimer(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, stats: CallStats) -> None:
        self.stats = stats

    async def intercept_unary_unary(self, continuation: Callable[..., Any],
                                    details: grpc.aio.ClientCallDetails, request: Any) -> Any:
        started = time.perf_counter()
        call = await continuation(details, request)
        try:
            await call
        finally:
            method = details.method.decode() if isinstance(details.method, bytes) \
                else str(details.method)
            self.stats.record(method, started, _size(request))
        return call


class StreamTimer(grpc.aio.StreamUnaryClientInterceptor):
    def __init__(self, stats: CallStats) -> None:
        self.stats = stats

    async def intercept_stream_unary(self, continuation: Callable[..., Any],
                                     details: grpc.aio.ClientCallDetails,
                                     request_iterator: AsyncIterable[Any]) -> Any:
        started = time.perf_counter()
        sent = 0

        async def counted() -> AsyncIterator[Any]:
            nonlocal sent
            async for message in request_iterator:
                sent += _size(message)
                yield message

        call = await continuation(details, counted())
        try:
            await call
        finally:
            method = details.method.decode() if isinstance(details.method, bytes) \
                else str(details.method)
            self.stats.record(method, started, sent)
        return call


def interceptors(stats: CallStats) -> list[grpc.aio.ClientInterceptor]:
    return [UnaryTimer(stats), StreamTimer(stats)]
