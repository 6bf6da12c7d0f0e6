"""What a device process tells its log once (a run's items past its codes, an aggregator
address that does not resolve) it remembers for its last runs, not for every run it ever saw:
before, a set of every (run, codec, bits) and of every address grew for as long as the process
ran (one entry a run, kept for months)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import Fleet
from fedhh_device.report import DeviceData

RUNS = 4096


def test_the_runs_told_of_stay_bounded_over_many_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[str] = []
    looked_up: list[str] = []

    async def count(self: Fleet, task: pb.Task) -> None:
        counted.append(task.run_id)

    async def look_up(self: Fleet, address: str) -> None:
        looked_up.append(address)

    monkeypatch.setattr(Fleet, "_count_past_codes", count)
    monkeypatch.setattr(Fleet, "_look_up", look_up)
    fleet = Fleet([(0, DeviceData(("word",), np.ones(1, dtype=np.int64)))], object(), {},
                  lambda address: None, seed=1)

    async def tell(task: pb.Task) -> None:
        fleet._tell_past_codes(task)
        fleet._tell_unresolved(task)
        await asyncio.gather(*fleet._counting)

    async def scenario() -> None:
        for run in range(RUNS):
            task = pb.Task(run_id=f"run-{run}", codec="unicode", max_bits=60,
                           aggregator_address=f"aggregator-{run}:7100")
            await tell(task)
            await tell(task)  # (a later task of the run: told already)

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert counted == [f"run-{run}" for run in range(RUNS)]
    assert looked_up == [f"aggregator-{run}:7100" for run in range(RUNS)]
    # What is remembered of them stays small whatever the number of runs.
    assert len(fleet._told) <= RUNS // 8 and len(fleet._looked_up) <= RUNS // 8
    assert not fleet._counting
