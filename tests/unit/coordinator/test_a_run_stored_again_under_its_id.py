"""A run whose row is gone and another stored under its id (its row deleted by hand, a store
restored from a backup while the coordinator runs) is answered as the new run, whose fixed
part (``runs.FixedRuns``) and deny list as shown (``runs.ShownDenyLists``) take the old one's
place: its deny codes are read once more, not at every call after.

Before, the old run's fixed part stayed kept: each GetRun and GetResults after read the new
run's row whole again, and GetResults showed the old run's deny list (kept by its id alone)
beside the new run's results. Served by the coordinator's own AdminService on a port from
the OS, on either store (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from admin_service_kit import (
    DENIED,
    METADATA,
    admin_stub,
    denying_run,
    recorded_queries,
)
from postgres_kit import PostgresServer

from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

pytestmark = pytest.mark.slow  # (a PostgreSQL server of its own)

AGAIN = ("stored-again-a", "stored-again-b")
CALLS = 4


async def stored_again(store: Store, run_id: str) -> None:
    """``run_id``'s row deleted and a run denying ``AGAIN`` stored under its id, its
    created_at set past the old one's (``time.time()`` twice may read alike)."""
    old = store.run_created_at(run_id)
    with store._tx() as db:
        db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    await create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                      min_devices=300, deny_list=AGAIN), run_id)
    with store._tx() as db:
        db.execute("UPDATE runs SET created_at = ? WHERE run_id = ?", (old + 1.0, run_id))


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store of each kind (PostgreSQL: a server of the test's own)."""
    if request.param == "sqlite":
        yield Store(tmp_path / "c.sqlite")
        return
    with PostgresServer() as pg:
        yield Store(pg.create_database())


def test_a_run_stored_again_under_its_id_is_answered_as_the_new_run_read_once(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    denying_run(store, "r")

    async def calls() -> tuple[list[str], list[list[str]], list[list[str]], list[str]]:
        async with admin_stub(store) as stub:
            before = await stub.GetResults(pb.GetResultsRequest(run_id="r"),
                                           metadata=METADATA, timeout=60)
            await stored_again(store, "r")
            reads.clear()
            results, configs = [], []
            for _ in range(CALLS):
                run = await stub.GetRun(pb.GetRunRequest(run_id="r"), metadata=METADATA,
                                        timeout=60)
                got = await stub.GetResults(pb.GetResultsRequest(run_id="r"),
                                            metadata=METADATA, timeout=60)
                configs.append(sorted(run.config.deny_list))
                results.append(sorted(got.deny_list))
            return sorted(before.deny_list), configs, results, list(reads)

    reads, _ = recorded_queries(store, monkeypatch)
    try:
        before, configs, results, after = asyncio.run(calls())
    finally:
        store.close()
    assert before == sorted(DENIED)
    assert configs == [sorted(AGAIN)] * CALLS
    assert results == [sorted(AGAIN)] * CALLS  # (the old code: DENIED, kept by the id)
    # (the new run's fixed part loaded once, its list shown from it: the old code read the
    # row whole at every call, 2 * CALLS)
    assert len([sql for sql in after if "deny_codes" in sql]) == 1
