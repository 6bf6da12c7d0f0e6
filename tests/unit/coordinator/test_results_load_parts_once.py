"""A run's first GetResults builds its fixed parts (``RunFixed.of``: its deny list made the
tree's, ~1 s with 300,000 items) once: the display of its deny list needs its codec alone.
Before, the display loaded them whole as well."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from admin_service_kit import METADATA, admin_stub

from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import RunFixed, create_run
from fedhh_coordinator.store import Store


def test_a_first_get_results_loads_the_runs_parts_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300, deny_list=("spam", "eggs")), "d"))
    loads: list[str] = []
    of = RunFixed.of

    def counted(row: Any, created_at: float = 0.0) -> RunFixed:
        loads.append(row.run_id)
        return of(row, created_at)

    monkeypatch.setattr(RunFixed, "of", staticmethod(counted))

    async def results() -> pb.Results:
        async with admin_stub(store) as stub:
            return await stub.GetResults(pb.GetResultsRequest(run_id="d"), metadata=METADATA,
                                         timeout=60)

    try:
        answer = asyncio.run(results())
    finally:
        store.close()
    assert sorted(answer.deny_list) == ["eggs", "spam"]
    assert loads == ["d"]
