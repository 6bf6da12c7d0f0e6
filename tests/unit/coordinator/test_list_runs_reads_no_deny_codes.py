"""ListRuns answers each run from the changing part of its row (``Store.run_head``) and its config
as listed, read once while kept: it reads no run's deny codes, each config once over many calls,
and each answer is byte for byte the listing as built from the row read whole. Before, each
ListRuns read every row whole and converted its config (~1 s a run with 1,000,000 deny items).
Served by the coordinator's own AdminService on a port from the OS."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from admin_service_kit import (
    METADATA,
    admin_stub,
    change_as_runs_do,
    denying_run,
    recorded_queries,
)

import fedhh.codec
from fedhh.codec.codebook import BUILTIN_NAMES, codec_spec
from fedhh.rpc.run_config import to_proto
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import stored_config, stored_ledger
from fedhh_coordinator.store import Store

CALLS = 6
RUNS = ("built-in", "inline")


def listed_whole(store: Store, run_id: str) -> bytes:
    """The run as ListRuns listed it before: its row read whole, its config converted, less its
    deny list and a codebook other than a built-in one's name."""
    row = store.run(run_id)
    ledger = stored_ledger(row)
    config = to_proto(stored_config(row))
    config.ClearField("deny_list")
    if config.codec not in BUILTIN_NAMES:
        config.ClearField("codec")
    return pb.Run(
        run_id=row.run_id, state=row.state, config=config, eps_local=row.eps_local,
        eps_spent=ledger.spent_epsilon(), rounds_released=ledger.rounds_recorded,
        error=row.error,
    ).SerializeToString(deterministic=True)


def test_list_runs_reads_no_deny_codes_and_lists_the_rows_as_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "c.sqlite")
    book = json.loads((Path(fedhh.codec.__file__).parent / "books" / "english.json").read_text())
    inline = codec_spec(json.dumps({**book, "name": "the-tests-own"}))
    for run_id, codec in zip(RUNS, ("english", inline), strict=True):
        denying_run(store, run_id, codec=codec, max_bits=16)

    async def listed() -> list[tuple[list[bytes], list[bytes]]]:
        answers = []
        async with admin_stub(store) as stub:
            for call in range(CALLS):
                change_as_runs_do(store, call, "inline", "built-in")
                got = await stub.ListRuns(pb.ListRunsRequest(), metadata=METADATA, timeout=60)
                with monkeypatch.context() as m:
                    m.setattr(store.db, "query", query)
                    answers.append(([run.SerializeToString(deterministic=True)
                                     for run in got.runs],
                                    [listed_whole(store, run_id) for run_id in RUNS]))
        return answers

    reads, query = recorded_queries(store, monkeypatch)
    try:
        answers = asyncio.run(listed())
    finally:
        store.close()
    assert [sql for sql in reads if "deny_codes" in sql] == []
    assert len([sql for sql in reads if "config" in sql]) == len(RUNS)  # (once a run)
    for got, whole in answers:
        assert got == whole
    assert len({tuple(got) for got, _ in answers}) == 3  # (each change seen)
