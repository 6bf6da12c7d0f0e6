"""GetRun answers a run from the changing part of its row (``Store.run_head``) and its fixed part
kept (``runs.FixedRuns``, the dashboard's too), its config on the wire made once: its deny list
is read once over many calls, and each answer is byte for byte the run as read whole from its
row. Before, each GetRun read the row whole and converted its config (~0.85 s a call with
1,000,000 deny items), and ``fedhh admin wait`` polls it. Served by the coordinator's own
AdminService on a port from the OS."""

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

from fedhh.rpc.run_config import to_proto
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import stored_config, stored_ledger
from fedhh_coordinator.service import _round_summary
from fedhh_coordinator.store import Store

CALLS = 6


def read_whole(store: Store, run_id: str) -> bytes:
    """The run as GetRun answered it before: its row read whole, its config converted."""
    row = store.run(run_id)
    ledger = stored_ledger(row)
    return pb.Run(
        run_id=row.run_id, state=row.state, config=to_proto(stored_config(row)),
        eps_local=row.eps_local, eps_spent=ledger.spent_epsilon(),
        rounds_released=ledger.rounds_recorded, error=row.error,
        rounds=[_round_summary(r) for r in store.rounds(run_id)],
    ).SerializeToString(deterministic=True)


def test_get_run_reads_the_deny_list_once_and_answers_the_row_as_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "c.sqlite")
    denying_run(store, "r")

    async def polled() -> list[tuple[bytes, bytes]]:
        answers = []
        async with admin_stub(store) as stub:
            for call in range(CALLS):
                change_as_runs_do(store, call, "r", "r")
                got = await stub.GetRun(pb.GetRunRequest(run_id="r"), metadata=METADATA,
                                        timeout=60)
                got.ClearField("version")  # (the long-poll's, no part of the row)
                with monkeypatch.context() as m:
                    m.setattr(store.db, "query", query)
                    answers.append((got.SerializeToString(deterministic=True),
                                    read_whole(store, "r")))
        return answers

    reads, query = recorded_queries(store, monkeypatch)
    try:
        answers = asyncio.run(polled())
    finally:
        store.close()
    assert len([sql for sql in reads if "deny_codes" in sql]) == 1
    for got, whole in answers:
        assert got == whole
    assert len({got for got, _ in answers}) == 4  # (each change seen)
