"""The SQLite store with its file locked by another process (an operator's ``sqlite3`` shell in
a transaction, a tool that writes): a statement waits for the lock at most
``BUSY_TIMEOUT_S``, and after a wait ran out, statements do not wait at all for a pause (1 s,
doubling while the lock stays held, to 30 s) unless the lock is free again (outside probe,
thirty-sixth stop).

Before, every write waited Python's default busy timeout of 5 s on the coordinator's event
loop: four admin calls against a locked file were answered after 5, 10, 15 and 20 s, and
health checks (every device's call with them) went 10 s unanswered. The store's clock is
injected: no test waits for a pause to pass. How long a statement may wait is read from the
store's connection (SQLite's busy timeout, which bounds the wait), not timed: a stalled machine
cannot make a refusal at once look slow. Only the waits that did happen are timed, from below.
A refusal arriving at all is the proof that the wait ended: the lock's holder, this thread,
never lets go while the store waits."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.db.sqlite import (
    BUSY_PAUSE_MAX_S,
    BUSY_PAUSE_S,
    BUSY_TIMEOUT_S,
    SqliteDatabase,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[SqliteDatabase, Clock, sqlite3.Connection]]:
    clock = Clock()
    db = SqliteDatabase(tmp_path / "store.sqlite", clock=clock)
    other = sqlite3.connect(tmp_path / "store.sqlite", isolation_level=None, timeout=0)
    yield db, clock, other
    other.close()
    db.close()


def write(db: SqliteDatabase, label: str) -> float:
    """Seconds one write transaction took (it mints a token row labelled ``label``)."""
    start = time.monotonic()
    with db.transaction() as tx:
        tx.execute("INSERT INTO enrollment_tokens (token_hash, label) VALUES (?, ?)",
                   (label.encode(), label))
    return time.monotonic() - start


def refused(db: SqliteDatabase, label: str) -> tuple[float, str]:
    start = time.monotonic()
    with pytest.raises(StoreUnavailable) as error:
        write(db, label)
    return time.monotonic() - start, str(error.value)


def waits_ms(db: SqliteDatabase) -> int:
    """How long the store's last statement could wait for the lock, in ms (0: not at all)."""
    return int(db._db.execute("PRAGMA busy_timeout").fetchone()[0])


def labels(db: SqliteDatabase) -> list[str]:
    return [r[0] for r in db.query("SELECT label FROM enrollment_tokens ORDER BY label")]


def test_a_held_lock_costs_one_wait_per_pause(
        store: tuple[SqliteDatabase, Clock, sqlite3.Connection]) -> None:
    db, clock, other = store
    other.execute("BEGIN IMMEDIATE")  # another process takes the write lock and keeps it
    took, message = refused(db, "a")
    assert took >= BUSY_TIMEOUT_S * 0.9 and waits_ms(db) == BUSY_TIMEOUT_S * 1000, took
    assert "database is locked" in message and "another process holds its lock" in message
    assert f"for {BUSY_PAUSE_S:g} s" in message, message
    # During the pause, writes fail at once; reads (WAL) are served.
    for label in ("b", "c", "d"):
        refused(db, label)
        assert waits_ms(db) == 0
    assert labels(db) == []
    # The pause over, one write waits again, fails, and the pause doubles (to at most 30 s).
    pause = BUSY_PAUSE_S
    for _ in range(5):  # 2, 4, 8, 16, 30 s
        clock.now += pause
        took, message = refused(db, "e")
        assert took >= BUSY_TIMEOUT_S * 0.9 and waits_ms(db) == BUSY_TIMEOUT_S * 1000, took
        pause = min(2 * pause, BUSY_PAUSE_MAX_S)
        assert f"for {pause:g} s" in message, message
        clock.now += pause / 2  # within the new pause: at once again
        refused(db, "f")
        assert waits_ms(db) == 0
        clock.now -= pause / 2
    assert pause == BUSY_PAUSE_MAX_S
    # The lock released, a write within the pause runs (at once); nothing refused was written.
    other.execute("ROLLBACK")
    clock.now += 1.0
    write(db, "g")
    assert waits_ms(db) == 0 and labels(db) == ["g"]
    # ... and the pause is over: a lock taken again is waited for again, from the first pause.
    other.execute("BEGIN IMMEDIATE")
    took, message = refused(db, "h")
    assert took >= BUSY_TIMEOUT_S * 0.9 and f"for {BUSY_PAUSE_S:g} s" in message
    assert waits_ms(db) == BUSY_TIMEOUT_S * 1000
    other.execute("ROLLBACK")


def test_a_short_lock_is_waited_for(
        store: tuple[SqliteDatabase, Clock, sqlite3.Connection], tmp_path: Path) -> None:
    """Another process's short transaction (a selector's enrolment) is waited for, not
    refused: the lock is released from a thread shortly after it was taken."""
    import threading

    db, _, _ = store
    holder = sqlite3.connect(tmp_path / "store.sqlite", isolation_level=None,
                             check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(BUSY_TIMEOUT_S / 5, lambda: holder.execute("ROLLBACK"))
    release.start()
    try:
        assert write(db, "a") < BUSY_TIMEOUT_S
    finally:
        release.join()
        holder.close()
    assert labels(db) == ["a"]
