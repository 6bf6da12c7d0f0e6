"""ListRuns over runs whose configurations are large: before, 18 runs with a legal deny list
of 1,000 items of 1,000 characters (1 MB each) passed gRPC's 16 MiB send limit, and ListRuns
answered RESOURCE_EXHAUSTED for good. The listing now leaves out each run's deny list,
codebook and attempts; GetRun still answers the whole run. Served by the coordinator's own
AdminService on a port from the OS."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from admin_service_kit import METADATA, admin_stub

import fedhh.codec
from fedhh.codec.codebook import codec_spec
from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

RUNS = 18
DENY_ITEMS = 1000


def stored_runs(store: Store) -> None:
    """RUNS runs, each with DENY_ITEMS deny-list items of 1,000 characters and an inline
    codebook; one is planned, the others are copies of its row (planning takes seconds)."""
    deny = tuple(f"{i:04d}" + "x" * 996 for i in range(DENY_ITEMS))
    book = json.loads((Path(fedhh.codec.__file__).parent / "books" / "english.json").read_text())
    codebook = codec_spec(json.dumps({**book, "name": "the-tests-own"}))
    config = RunConfig(deny_list=deny, codec=codebook, max_bits=16)
    row = asyncio.run(create_run(store, config, "run-0"))
    for n in range(1, RUNS):
        store.create_run(f"run-{n}", row.config, row.eps_local, row.tree, row.ledger,
                         row.deny_codes)


async def list_and_get(store: Store) -> tuple[list[pb.Run], pb.Run]:
    async with admin_stub(store) as stub:
        listed = await stub.ListRuns(pb.ListRunsRequest(), metadata=METADATA, timeout=60)
        whole = await stub.GetRun(pb.GetRunRequest(run_id="run-3"), metadata=METADATA,
                                  timeout=60)
    return list(listed.runs), whole


def test_runs_with_large_configurations_are_listed(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    stored_runs(store)
    listed, whole = asyncio.run(list_and_get(store))
    assert [r.run_id for r in listed] == [f"run-{n}" for n in range(RUNS)]
    for run in listed:
        assert run.state == "pending" and run.config.eps_agg == whole.config.eps_agg
        assert not run.config.deny_list and not run.config.HasField("codec") and not run.rounds
    assert len(whole.config.deny_list) == DENY_ITEMS
    assert whole.config.codec.startswith("{")
