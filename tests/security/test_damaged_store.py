"""A coordinator's SQLite store whose file is damaged after it opened (probe 42, stored state):
a page that no longer reads back ("database disk image is malformed", SQLite pages carry no
checksum) is the store damaged, said as such, not a bug of the run under way. Before, the run
was failed for good ("internal error: database disk image is malformed") when the damaged
page was the lifetime budgets', the coordinator stopped with a traceback when it was the runs
table's, and callers were told INTERNAL."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh.rpc.errors import status_of
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.db.interface import StoreCorrupt
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


def _damage_table(path: Path, table: str) -> None:
    """Change the header of ``table``'s root page, as a bad sector or a stray write would."""
    with sqlite3.connect(path) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                          (table,)).fetchone()[0]
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(path, "r+b") as file:
        file.seek((root - 1) * page_size)
        header = bytearray(file.read(12))
        file.seek((root - 1) * page_size)
        file.write(bytes(b ^ 0xA5 for b in header))


def test_a_damaged_page_stops_the_runner_and_leaves_the_run_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "coordinator.sqlite"
    store = Store(path)
    device = store.add_device(b"c" * 32, b"k" * 32, "one")

    row = asyncio.run(create_run(store, RunConfig(
        eps_agg=64.0, delta=1e-6, rounds=1, max_bits=10, dim_limit=1 << 10, target_devices=200,
        min_devices=150, completion_rounds=0), "t"))  # (small: its ledger solved in ~1 s)
    store.create_run("before", row.config, row.eps_local, row.tree, row.ledger, row.deny_codes)
    store.charge_devices("before", [device], 64.0, 1e-6)
    store.set_run_state("before", "done")
    store.set_run_state("t", "running")
    store.close()
    _damage_table(path, "device_spends")

    store = Store(path)  # (opens: its tables are all there)
    with pytest.raises(StoreCorrupt) as damaged:
        store.device_spends(0.0)
    message = str(damaged.value)
    assert message.startswith(f"the store {path} is damaged (database disk image is "
                              f"malformed): it is left as it is")
    assert f"sqlite3 {path} .recover" in message
    assert status_of(damaged.value) == grpc.StatusCode.DATA_LOSS  # (was INTERNAL)

    runner = Runner(store, None, Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                    DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                    LifetimeBudget(eps=1e9, delta=0.5))

    async def serve() -> BaseException | None:
        task = asyncio.create_task(runner.serve())
        # Until the runner stops, or (the old code) the run is marked: never both.
        for _ in range(600):
            if task.done() or store.run("t").state != "running":
                break
            await asyncio.sleep(0.1)
        if not task.done():
            task.cancel()
            return None
        return task.exception()

    stopped = asyncio.run(serve())
    assert isinstance(stopped, StoreCorrupt), stopped
    row = store.run("t")
    assert (row.state, row.error) == ("running", "")  # before: failed, "internal error: ..."
    store.close()
