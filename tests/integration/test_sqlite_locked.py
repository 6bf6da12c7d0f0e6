"""The SQLite store's file held or failing for a while (another process holding its write lock
past the busy timeout: a backup, an operator's `sqlite3` shell): before, the store raised
sqlite3.OperationalError "database is locked", the runner failed the run in progress for good
("internal error: database is locked") and every caller was told INTERNAL. Now it is
``StoreUnavailable`` (UNAVAILABLE, and the runner waits for the store,
test_store_outage.py), nothing of the transaction is kept, and the store works as
soon as the lock is released; a statement's own mistake stays what it was."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import grpc
import pytest

from fedhh.rpc.errors import status_of
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.store import Store


def test_a_held_write_lock_is_the_store_unavailable_and_changes_nothing(tmp_path: Path
                                                                        ) -> None:
    path = tmp_path / "coordinator.sqlite"
    store = Store(str(path))
    store.db._db.execute("PRAGMA busy_timeout = 50")  # (5 s by default: a test's patience)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(StoreUnavailable, match="database is locked") as error:
            store.add_enrollment_tokens([b"a" * 32])
        assert status_of(error.value) == grpc.StatusCode.UNAVAILABLE
        other.execute("ROLLBACK")
        assert store.enrollment(now=0.0).tokens_unused == 0  # nothing was kept
        assert store.add_enrollment_tokens([b"a" * 32]) == 1  # and it works again
        assert store.enrollment(now=0.0).tokens_unused == 1
        # a statement's own mistake is not an outage
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            store.db.query("SELECT * FROM no_such_table")
        with pytest.raises(sqlite3.OperationalError, match="syntax"), store.db.transaction() \
                as db:
            db.execute("SELEKT 1")
        assert not store.db._db.in_transaction
        assert store.add_enrollment_tokens([b"b" * 32]) == 1
    finally:
        other.close()
        store.close()


def test_the_runner_waits_longer_for_a_store_that_fails_again_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that reads but cannot write (a full disk) answers the runner's poll at once and
    fails the resumed run's first write: each such outage may wait twice the last (to 30 s),
    and one long after the last starts again from the runner's retry delay. Each pause is drawn
    from zero to that bound (full jitter; the draws here at its middle): before, the pauses
    were the bounds themselves, the same for every coordinator that lost the database."""
    import asyncio

    from fedhh import backoff
    from fedhh_coordinator import runner as runner_module
    from fedhh_coordinator.runner import STORE_RETRY_MAX_S, Runner

    class Middle(random.Random):
        def random(self) -> float:
            return 0.5

    class Reads:
        def __init__(self) -> None:
            self.failures = 0  # polls still to fail

        def run_states(self, states: object = None) -> list[tuple[str, str]]:
            if self.failures:
                self.failures -= 1
                raise StoreUnavailable("the database failed: disk I/O error")
            return []

    clock = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(runner_module.asyncio, "sleep", sleep)
    monkeypatch.setattr(runner_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(backoff, "JITTER", Middle())
    store = Reads()
    runner = Runner(store, None, None, None, None, None)  # type: ignore[arg-type]
    outage = StoreUnavailable("the database failed: database or disk is full")

    def waits(failures: int) -> list[float]:
        store.failures = failures
        slept.clear()
        asyncio.run(runner._await_store(outage))
        return list(slept)

    assert waits(0) == [0.5]
    assert waits(0) == [1.0]  # failed again at once: twice the last bound
    assert waits(2) == [2.0, 4.0, 8.0]
    assert waits(0) == [STORE_RETRY_MAX_S / 2]
    assert waits(0) == [STORE_RETRY_MAX_S / 2]
    clock[0] += STORE_RETRY_MAX_S  # a while without an outage
    assert waits(1) == [0.5, 1.0]
