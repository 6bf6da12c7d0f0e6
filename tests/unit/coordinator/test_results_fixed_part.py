"""GetResults answers a run from the changing part of its row (``Store.run_head``) and its fixed
part kept (``runs.FixedRuns``: config and tree, GetRun's and the dashboard's too): over many
calls its deny codes are read once for the tree and once for their display, and each answer
is byte for byte what a service that keeps nothing answers from the row as it is then.
Before, each GetResults read the row whole and rebuilt the tree (~3 s with 1,000,000 deny
items). Served by the coordinator's own AdminService on a port from the OS."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from admin_service_kit import (
    METADATA,
    admin_stub,
    change_as_runs_do,
    denying_run,
    recorded_queries,
)

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.store import Store

CALLS = 6


def test_get_results_reads_the_deny_codes_once_and_answers_the_row_as_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "c.sqlite")
    denying_run(store, "r")

    request = pb.GetResultsRequest(run_id="r")

    async def polled() -> list[tuple[bytes, bytes]]:
        answers = []
        async with admin_stub(store) as stub:
            for call in range(CALLS):
                change_as_runs_do(store, call, "r", "r")
                got = await stub.GetResults(request, metadata=METADATA, timeout=60)
                with monkeypatch.context() as m:
                    m.setattr(store.db, "query", query)
                    async with admin_stub(store) as fresh:
                        whole = await fresh.GetResults(request, metadata=METADATA, timeout=60)
                answers.append((got.SerializeToString(deterministic=True),
                                whole.SerializeToString(deterministic=True)))
        return answers

    reads, query = recorded_queries(store, monkeypatch)
    try:
        answers = asyncio.run(polled())
    finally:
        store.close()
    assert len([sql for sql in reads if "deny_codes" in sql]) == 1  # (the tree's, shown from it)
    for got, whole in answers:
        assert got == whole
    assert len({got for got, _ in answers}) == 3  # (each change it answers: rounds, state)
