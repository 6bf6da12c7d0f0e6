"""What a load test asks of the services it starts, from its spec alone."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fedhh.rpc.loadtest import LoadSpec


@pytest.mark.parametrize(("shards", "workers"), [(1, 1), (2, 2), (17, 1), (40, 2), (41, 2),
                                                 (200, 3)])
def test_a_worker_may_hold_two_attempts_of_its_shards(shards: int, workers: int) -> None:
    # At the aggregator's default (16 rounds held at once) a round of 40 shards on 2 workers
    # was refused before any device ran; a retried attempt opens its shards while the last
    # attempt's may not be fetched yet.
    spec = LoadSpec(devices=1000 * shards, dim=4096, dropout=0.1, shards=shards, workers=workers)
    held = spec.rounds_per_worker
    assert held >= 16 and held >= 2 * math.ceil(shards / workers)
    # ... and the workers are told so (the aggregator's own default is 16).
    flags = spec.aggregator_flags()
    assert flags[flags.index("--max-rounds") + 1] == str(held)


def test_a_device_process_that_left_no_figures_is_named_with_its_log(tmp_path: Path) -> None:
    """A device process killed before it wrote its stats file (before, a FileNotFoundError
    traceback ended the load test after the run); a file cut short is named the same way."""
    from fedhh.errors import StateError
    from fedhh.rpc.loadtest import _device_stats

    with pytest.raises(StateError, match=r"device process 1 left no figures .*devices-1\.log"):
        _device_stats(tmp_path, 1)
    (tmp_path / "devices-2.stats.json").write_text('{"tasks": 3')
    with pytest.raises(StateError, match="device process 2 left no figures"):
        _device_stats(tmp_path, 2)
    (tmp_path / "devices-0.stats.json").write_text('{"tasks": 3}')
    assert _device_stats(tmp_path, 0) == {"tasks": 3}
