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

# The calls a device process puts on one connection to a service by default (``fedhh device
# --devices-per-connection``; a fleet's ``DEVICES_PER_CONNECTION``): its devices' GetTask
# long-polls at a coordinator or selector, their session streams at an aggregator.
DEVICE_CALLS_PER_CONNECTION = 1024


def stream_cap_warning(cap: int) -> str:
    """What to tell the operator of a service that admits ``cap`` streams per connection
    (--max-streams-per-connection) where that is fewer than ``DEVICE_CALLS_PER_CONNECTION``;
    "" where it is not. gRPC queues a call past the cap until a stream frees, which for a
    long-poll or a session is its whole wait, and neither side can settle it alone: a device
    process cannot learn the cap (gRPC keeps the peer's HTTP/2 SETTINGS to itself), and the
    service cannot refuse it (a device on a connection of its own, or a process run with a
    lower --devices-per-connection, is well served by a low cap)."""
    if cap >= DEVICE_CALLS_PER_CONNECTION:
        return ""
    return (f"--max-streams-per-connection {cap:,} is below the {DEVICE_CALLS_PER_CONNECTION:,} "
            "calls a `fedhh device` process puts on one connection by default "
            "(--devices-per-connection): its devices' calls past the cap wait for a stream, a "
            "GetTask long-poll or a session stream holding one for its whole wait. Run device "
            f"processes with --devices-per-connection {cap} or less")


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
