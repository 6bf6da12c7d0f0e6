"""Calls of many simulated devices to one gRPC service, spread over as many connections as keep
each within the service's cap on concurrent streams per connection.

A device process's devices each hold a ``GetTask`` long-poll at the coordinator (or a
selector): 2,000 devices in one process had 2,000 calls open on its one connection. The
device-facing ports cap streams per connection (``--max-streams-per-connection``, a bound on
what a flood of reset streams holds, docs/threat-model.md), and gRPC queues a call past the
cap until a stream frees, which for a long-poll is the poll's whole wait: so a pool opens
another channel once every channel it has holds ``per_channel`` calls, and a call goes to
the first channel with room (a fleet of up to ``per_channel`` devices keeps one connection).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class StubPool:
    """The unary ``methods`` of ``stub_type(channel)`` over channels made by ``make`` as
    needed, each with at most ``per_channel`` of this pool's calls in flight."""

    def __init__(self, make: Callable[[], Any], stub_type: Callable[[Any], Any],
                 methods: Iterable[str], per_channel: int) -> None:
        if per_channel < 1:
            raise ValueError(f"per_channel must be >= 1, got {per_channel}")
        self._make = make
        self._methods = frozenset(methods)
        self._stub_type = stub_type
        self.per_channel = per_channel
        self.channels: list[Any] = []
        self._stubs: list[Any] = []
        self.in_flight: list[int] = []
        self._open()  # (the first now: an address or credentials that cannot work fail here)

    def _turn(self) -> int:
        for i, calls in enumerate(self.in_flight):
            if calls < self.per_channel:
                return i
        return self._open()

    def _open(self) -> int:
        channel = self._make()
        self.channels.append(channel)
        self._stubs.append(self._stub_type(channel))
        self.in_flight.append(0)
        return len(self.channels) - 1

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(f"{name} is not a method of this stub")

        async def call(*args: Any, **kwargs: Any) -> Any:
            i = self._turn()
            method = getattr(self._stubs[i], name)
            self.in_flight[i] += 1
            try:
                return await method(*args, **kwargs)
            finally:
                self.in_flight[i] -= 1
        return call

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()
