"""Per-method call latencies and request bytes of a device process, for the load test's
percentiles and bytes per device. The calls are timed where they are made (the fleet's
coordinator calls, and ``fedhh.rpc.aggregator_client`` through its ``observe`` hook), not by
gRPC interceptors, whose per-call cost would be charged to the devices being measured."""

from __future__ import annotations

from collections import defaultdict


class CallStats:
    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.bytes_sent: dict[str, int] = defaultdict(int)

    def record(self, method: str, seconds: float, sent: int) -> None:
        """One call of ``method`` (a bare RPC name), its duration and its request's bytes."""
        self.seconds[method].append(seconds)
        self.bytes_sent[method] += sent
