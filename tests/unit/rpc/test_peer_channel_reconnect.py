"""A service's channels to its peers reconnect at least every ``serving.RECONNECT_MAX_MS``, as
a device's and a selector's do: the coordinator's to its aggregator or combiner and a
combiner's to each worker. Before, they kept gRPC's own backoff (1.6x up to 120 s, calls
failing at once between tries): a combiner polling a worker every second saw it serving again
9.0 / 12.0 / 22.1 s after it restarted from 20 / 60 / 150 s down, the round waiting meanwhile
(/tmp/hard53/reconnect.py, the combiner's ``WorkerPool.describe``)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from fedhh.rpc import serving
from fedhh_aggregator.workers import WorkerPool, WorkerSpec
from fedhh_coordinator.control import GrpcAggregator


def test_the_coordinators_and_the_combiners_peer_channels_reconnect_within_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    opened: dict[str, dict[str, Any]] = {}
    insecure_channel = grpc.aio.insecure_channel

    def recording(address: str, options: Any = None, **kwargs: Any) -> Any:
        opened[address] = dict(options or ())
        return insecure_channel(address, options=options, **kwargs)

    monkeypatch.setattr(grpc.aio, "insecure_channel", recording)

    async def open_both() -> None:
        aggregator = GrpcAggregator("127.0.0.1:7100", None, b"t" * 32)
        pool = WorkerPool([WorkerSpec("127.0.0.1:7201", "127.0.0.1:7201")], None, b"t" * 32)
        await aggregator.close()
        await pool.close()

    asyncio.run(open_both())
    assert set(opened) == {"127.0.0.1:7100", "127.0.0.1:7201"}
    for address, options in opened.items():
        assert options.get("grpc.max_reconnect_backoff_ms") == serving.RECONNECT_MAX_MS, address
        # (the message caps and pings of every peer channel are kept)
        assert set(serving.PEER_OPTIONS) <= set(options.items()), address
