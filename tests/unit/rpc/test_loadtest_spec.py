"""What a load test asks of the services it starts, from its spec alone."""

from __future__ import annotations

import math

import pytest

from fedhh.rpc.loadtest import LoadSpec


@pytest.mark.parametrize(("shards", "workers"), [(1, 1), (2, 2), (17, 1), (40, 2), (41, 2),
                                                 (200, 3)])
def test_a_worker_may_hold_two_attempts_of_its_shards(shards: int, workers: int) -> None:
    # At the aggregator's default (16 rounds held at once) a round of 40 shards on 2 workers
    # was refused before any device ran; a retried attempt opens its shards while the last
    # attempt's may not be fetched yet.
    held = LoadSpec(devices=1000 * shards, dim=4096, dropout=0.1, shards=shards,
                    workers=workers).rounds_per_worker
    assert held >= 16 and held >= 2 * math.ceil(shards / workers)
