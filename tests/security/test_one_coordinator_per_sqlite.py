"""One coordinator per SQLite store (probe 37).

Before, a second ``fedhh coordinator`` given the --db file of a running one (a careless
restart, a compose service scaled to two) started beside it: both runners drove the same runs
(each opening their rounds at the aggregator), while on PostgreSQL the second waits for the
first's advisory lock. Now the coordinator takes an exclusive lock on ``<db>.lock`` before it
opens the store, waits up to 60 s for a previous holder (a restart overlapping the old
process's exit), then refuses, naming the lock. Selectors and the dashboard's reader do not
take it."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.topology import LocalTopology
from fedhh_coordinator.main import lock_sqlite_store

pytestmark = pytest.mark.slow


def test_the_lock_is_one_holder_at_a_time(tmp_path: Path) -> None:
    db = str(tmp_path / "coordinator.sqlite")
    held = lock_sqlite_store(db)
    assert held is not None
    with pytest.raises(ConfigError) as refused:
        lock_sqlite_store(db, timeout_s=0.3)
    assert str(refused.value) == (
        f"another coordinator holds --db {db} (its lock {db}.lock) after 0.3 s: a store serves "
        "one coordinator; stop the other first (selectors beside it run `fedhh selector`)")
    os.close(held)
    again = lock_sqlite_store(db, timeout_s=0.3)
    assert again is not None
    os.close(again)
    assert lock_sqlite_store("postgresql://u@127.0.0.1:1/db") is None


def wait_for(predicate: object, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # polling files the child writes


def test_a_coordinator_waits_for_the_store_another_holds(tmp_path: Path) -> None:
    with LocalTopology(tmp_path / "topology", tls=False,
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        topo.start_aggregator()
        db = topo.database
        holder = os.open(db + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(holder, fcntl.LOCK_EX)  # (another coordinator, for the child)
        try:
            ready, log = tmp_path / "ready.json", tmp_path / "coordinator.log"
            with open(log, "wb") as out:
                child = subprocess.Popen(
                    [sys.executable, "-m", "fedhh.cli.main", "coordinator",
                     "--listen", "127.0.0.1:0", "--insecure", "--db", db,
                     "--signing-key", str(topo.signing_key),
                     "--aggregator", topo.address("aggregator"),
                     "--control-token-file", str(topo.workdir / "control.token"),
                     "--admin-token-file", str(topo.workdir / "admin.token"),
                     "--ready-file", str(ready)],
                    stdout=out, stderr=subprocess.STDOUT, env=topo.env)
            try:
                wait_for(lambda: "waiting for another coordinator to release the store"
                         in log.read_text() or child.poll() is not None or ready.exists(),
                         "the coordinator neither waited nor started")
                assert not ready.exists() and child.poll() is None, log.read_text()[-2000:]
                os.close(holder)  # the other coordinator exits
                holder = -1
                wait_for(lambda: ready.exists() or child.poll() is not None,
                         "the coordinator did not start once the store was free")
                assert child.poll() is None, log.read_text()[-2000:]
                assert json.loads(ready.read_text())["port"] > 0
            finally:
                child.terminate()
                child.wait(30)
        finally:
            if holder >= 0:
                os.close(holder)
