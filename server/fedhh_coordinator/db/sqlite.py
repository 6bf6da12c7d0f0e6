"""The coordinator's store in an embedded SQLite file (the default engine)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedhh.backoff import Holdoff
from fedhh.errors import ConfigError
from fedhh.output_paths import check_parent_folder
from fedhh_coordinator.db.interface import Cursor, StoreCorrupt, StoreUnavailable, Transaction
from fedhh_coordinator.db.tables import check_store_tables, no_store_there, store_schema

__all__ = ["SQLITE_SCHEMA", "SqliteDatabase", "check_store_folder"]

SQLITE_SCHEMA = store_schema(generated_id="INTEGER PRIMARY KEY AUTOINCREMENT",
                             device_ref="INTEGER", blob="BLOB", real="REAL")


# SQLite's primary result codes for a file that cannot be used for now: busy or locked (another
# process holds the write lock past the busy timeout: a backup, an operator's `sqlite3`),
# read-only, an I/O error, the disk full, the file not openable. Such a failure is the store
# unavailable (UNAVAILABLE; the runner waits for it), not a bug: before, the run in progress
# was failed for good ("internal error: database is locked") and callers were told INTERNAL.
_UNAVAILABLE_CODES = frozenset({5, 6, 8, 10, 13, 14})


# SQLite's codes of a lock another connection holds (SQLITE_BUSY, SQLITE_LOCKED).
_BUSY_CODES = frozenset({5, 6})
# How long a statement waits for a lock another process holds (SQLite's busy timeout). The
# store's own transactions last milliseconds (the coordinator's, each selector's), so a
# second is plenty for them; a lock held longer is an outsider's (an operator's `sqlite3`
# shell in a transaction, a backup tool that writes). Each wait blocks the coordinator's event
# loop, every device's call and the health checks with it: at Python's default of 5 s, four
# admin calls against a locked file took 20 s, and health checks went 10 s unanswered.
BUSY_TIMEOUT_S = 1.0
# After a wait ran out, statements do not wait at all (they run at once if the lock is free,
# else fail at once) for a pause: 1 s, doubling while the lock stays held, to 30 s
# (``fedhh.backoff.Holdoff``, as the PostgreSQL store's reconnections and lock waits).
BUSY_PAUSE_S = 1.0
BUSY_PAUSE_MAX_S = 30.0


# SQLite's codes of a file whose pages do not read back as a database: SQLITE_CORRUPT ("database
# disk image is malformed") and SQLITE_NOTADB. sqlite3 raises them as DatabaseError, which the
# store's callers took for a bug.
_CORRUPT_CODES = frozenset({11, 26})


def corrupt(location: str, error: sqlite3.DatabaseError) -> StoreCorrupt | None:
    """``StoreCorrupt`` for a file found damaged (``_CORRUPT_CODES``), else None."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in _CORRUPT_CODES:
        return None
    return StoreCorrupt(
        f"the store {location} is damaged ({error}): it is left as it is; stop what uses it, "
        f"then restore it from a backup, or copy out what still reads (sqlite3 "
        f"{location} .recover)")


def unavailable(error: sqlite3.OperationalError) -> Exception:
    """``StoreUnavailable`` for a failure of the file (``_UNAVAILABLE_CODES``), else the error
    itself (a statement's own mistake stays a bug)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _UNAVAILABLE_CODES:
        return StoreUnavailable(f"the database failed: {error}")
    return error


def check_store_folder(location: str | Path) -> None:
    """Refuse a store file whose folder does not exist (``--db``): only the file is made.
    Before, every missing folder was made, so a typo in one started an empty store, and the
    runs, enrolled devices and privacy spent seemed lost."""
    check_parent_folder(f"--db {location}", location, "the store's file is made, never a "
                        "folder", "start an empty store: no devices, runs or privacy spent")


class _SqliteTransaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self._db.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        return int(self._db.executemany(sql, [tuple(r) for r in rows]).rowcount)


class SqliteDatabase:
    """One SQLite file in WAL mode, fsync'd on every commit (``synchronous=FULL``); writes take
    the file's write lock at BEGIN (``BEGIN IMMEDIATE``)."""

    kind = "sqlite"

    def __init__(self, path: str | Path, *, create: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``create``: make the schema in a new database (a selector, which reads the
        coordinator's store, refuses one instead)."""
        self._clock = clock
        self._busy = Holdoff(BUSY_PAUSE_S, BUSY_PAUSE_MAX_S)  # while held, statements do not wait
        self._waiting = True
        self.location = str(path)
        if self.location != ":memory:":
            file = Path(self.location)
            if file.is_file() and file.stat().st_size == 0:
                # SQLite reads an empty file as a new database: a store truncated to nothing
                # would start again with no devices and no privacy spent.
                raise ConfigError(f"--db {self.location} is an empty file, not a store (a new "
                                  "store is made where no file is); it is left as it is")
            if not file.exists():
                if not create and not file.absolute().parent.is_dir():
                    raise ConfigError(no_store_there(self.location))
                check_store_folder(self.location)
        self._db = sqlite3.connect(self.location, check_same_thread=False,
                                   isolation_level=None, timeout=BUSY_TIMEOUT_S)
        self._lock = threading.Lock()
        try:
            new = check_store_tables(self._tables(), self.location)  # before any write
            if new and not create:
                raise ConfigError(no_store_there(self.location))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            if new:  # every table or none, whenever the process stops
                self._db.executescript(f"BEGIN IMMEDIATE; {SQLITE_SCHEMA} COMMIT;")
        except sqlite3.DatabaseError as error:  # not a SQLite file, or a damaged one
            self._db.close()
            raise ConfigError(f"--db {self.location} is not a usable SQLite store ({error}); "
                              "it is left as it is") from None
        except ConfigError:
            self._db.close()
            raise

    def _tables(self) -> dict[str, set[str]]:
        names = [str(r[0]) for r in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {name: {str(c[1]) for c in self._db.execute(
            "SELECT * FROM pragma_table_info(?)", (name,))} for name in names}

    def _set_waiting(self) -> None:
        """Wait for a lock up to ``BUSY_TIMEOUT_S``, or not at all during a pause (module
        constants): a file locked by another process for long blocks the event loop for one
        wait per pause, not one per statement."""
        waiting = not self._busy.held(self._clock())
        if waiting != self._waiting:
            wait_ms = int(BUSY_TIMEOUT_S * 1000) if waiting else 0
            self._db.execute(f"PRAGMA busy_timeout = {wait_ms}")
            self._waiting = waiting

    def _failed(self, error: sqlite3.DatabaseError) -> Exception:
        damaged = corrupt(self.location, error)
        if damaged is not None:
            return damaged
        if not isinstance(error, sqlite3.OperationalError):
            return error  # (a constraint's IntegrityError and the like: the statement's own)
        code = getattr(error, "sqlite_errorcode", None)
        if code is None or code & 0xFF not in _BUSY_CODES:
            return unavailable(error)
        if self._waiting:  # (a statement of a pause that found the lock held: the pause goes on)
            self._busy.failed(self._clock())
        return StoreUnavailable(
            f"the database failed: {error} (another process holds its lock; statements fail "
            f"at once for {self._busy.length_s:g} s unless it is free)")

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self._lock:
            try:
                self._set_waiting()
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as error:
                raise self._failed(error) from None
            try:
                yield _SqliteTransaction(self._db)
                self._db.execute("COMMIT")
            except BaseException as error:
                if self._db.in_transaction:  # (SQLite ends some failed ones itself)
                    self._rollback(error)
                if isinstance(error, sqlite3.DatabaseError):
                    raise self._failed(error) from None
                raise
            self._busy.succeeded()

    def _rollback(self, error: BaseException) -> None:
        """Roll back after ``error``; on a damaged file the rollback may fail too, and then
        the file's damage is the error raised (not the rollback's own)."""
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.DatabaseError as failed:
            damaged = corrupt(self.location, failed) or (
                corrupt(self.location, error) if isinstance(error, sqlite3.DatabaseError)
                else None)
            if damaged is None:
                raise
            raise damaged from None

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                self._set_waiting()
                rows = list(self._db.execute(sql, tuple(params)).fetchall())
            except sqlite3.DatabaseError as error:
                raise self._failed(error) from None
            return rows

    def close(self) -> None:
        with self._lock:
            self._db.close()
