"""GetResults' rows over gRPC: a code wider than 64 bits (completion rounds make them up to 576)
leaves the fixed64 ``code`` absent, its presence saying so, with the whole code in
``code_bytes``; a code of up to 64 bits is in both. Before, a wide code's ``code`` was 0, and a
client reading it got 0 with nothing to tell it from a code of 0. Served by the coordinator's
own AdminService on a port from the OS."""

from __future__ import annotations

import asyncio
from pathlib import Path

from admin_service_kit import METADATA, admin_stub

from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.server.prefixtree import Found, TreeState
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.store import Store

# Completion rounds that 100 devices can budget: 128-bit codes, which hold LONG whole (all four
# at eps_agg 3; at 1, since the completion weights of 2026-12-05, only the first)
WIDE = RunConfig(completion_rounds=4, completion_weight=1.0, eps_agg=3.0)
LONG = ["👩🏽‍💻", "-1.5e+10", "a+tag@example.com"]
NARROW = RunConfig(completion_rounds=0, max_bits=60)
SHORT = ["cocoa", "42", "é"]


def finished_run(store: Store, config: RunConfig, items: list[str]) -> list[int]:
    """Run "r1" of ``config``, done after one released round that found ``items`` whole; their
    codes."""
    row = asyncio.run(create_run(store, config, "r1"))
    parts = RunParts.load(row)
    codes = cw.to_ints(parts.tree.codec.encode_many(items).codes)
    attempt = store.open_round("r1", 1)
    store.charge_round("r1", 1, attempt, "releasing", 200, parts.ledger.record(0, 200).to_dict())
    state = TreeState(next_round=2, discovered=tuple(
        Found(code, 90.0 - i, 1) for i, code in enumerate(codes)), done=True)
    store.release_round("r1", 1, attempt, state.to_dict(), {"kept": 0, "participants": 200},
                        done=True)
    return codes


async def results(store: Store) -> pb.Results:
    async with admin_stub(store) as stub:
        return await stub.GetResults(pb.GetResultsRequest(run_id="r1"), metadata=METADATA,
                                     timeout=60)


def served(tmp_path: Path, config: RunConfig, items: list[str]
           ) -> tuple[list[int], pb.Results]:
    store = Store(tmp_path / "c.sqlite")
    try:
        codes = finished_run(store, config, items)
        return codes, asyncio.run(results(store))
    finally:
        store.close()


def test_a_wide_code_is_absent_from_code_and_whole_in_code_bytes(tmp_path: Path) -> None:
    codes, reply = served(tmp_path, WIDE, LONG)
    assert [h.item for h in reply.heavy_hitters] == LONG
    assert all(code >= 1 << 64 for code in codes)  # (none fits a fixed64)
    for hitter, code in zip(reply.heavy_hitters, codes, strict=True):
        assert not hitter.HasField("code"), hitter
        assert int.from_bytes(hitter.code_bytes, "big") == code


def test_a_code_of_64_bits_at_most_is_in_both(tmp_path: Path) -> None:
    codes, reply = served(tmp_path, NARROW, SHORT)
    assert [h.item for h in reply.heavy_hitters] == SHORT
    for hitter, code in zip(reply.heavy_hitters, codes, strict=True):
        assert hitter.HasField("code") and hitter.code == code
        assert int.from_bytes(hitter.code_bytes, "big") == code and len(hitter.code_bytes) == 8
