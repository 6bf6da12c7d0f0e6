"""Where the coordinator's store lives: an embedded SQLite file (the default) or a PostgreSQL
server (``--db postgresql://...``, :mod:`fedhh_coordinator.store_postgres`).

Both speak the same small interface to :class:`~fedhh_coordinator.store.Store`: one
transaction at a time (:meth:`Database.transaction`, committed on exit, rolled back on any
exception), reads outside transactions (:meth:`Database.query`), statements written once with
``?`` placeholders and SQL that both engines run alike (``INSERT ... ON CONFLICT DO NOTHING``,
``RETURNING``). The schema is the same tables and columns in each engine's types.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from fedhh.errors import ConfigError

__all__ = ["Cursor", "Database", "SqliteDatabase", "Transaction", "is_postgres_url",
           "open_database", "redact"]

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS devices (
    device_id INTEGER PRIMARY KEY AUTOINCREMENT,
    credential_hash BLOB NOT NULL,
    identity_key BLOB NOT NULL UNIQUE,
    label TEXT NOT NULL DEFAULT '',
    enrolled_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    state TEXT NOT NULL,
    eps_local REAL NOT NULL,
    tree TEXT NOT NULL,
    ledger TEXT NOT NULL,
    deny_codes TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    round INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    participants INTEGER NOT NULL DEFAULT 0,
    summary TEXT NOT NULL DEFAULT '{}',
    started_at REAL NOT NULL,
    finished_at REAL,
    PRIMARY KEY (run_id, round, attempt)
);
CREATE TABLE IF NOT EXISTS enrollment_tokens (
    token_hash BLOB PRIMARY KEY,
    label TEXT NOT NULL DEFAULT '',
    expires_at REAL,
    used_by INTEGER REFERENCES devices(device_id),
    used_at REAL
);
CREATE TABLE IF NOT EXISTS device_spends (
    device_id INTEGER NOT NULL REFERENCES devices(device_id),
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    eps REAL NOT NULL,
    delta REAL NOT NULL,
    charged_at REAL NOT NULL,
    PRIMARY KEY (device_id, run_id)
);
"""


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Transaction(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run ``sql`` once per row; returns the rows it changed in all."""
        ...


class Database(Protocol):
    #: "sqlite" or "postgresql"
    kind: str
    #: where it is, for messages (no password)
    location: str

    def transaction(self) -> Any:
        """A context manager yielding a :class:`Transaction`; commits on exit."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def close(self) -> None: ...


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

    def __init__(self, path: str | Path) -> None:
        self.location = str(path)
        if self.location != ":memory:":
            Path(self.location).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.location, check_same_thread=False,
                                   isolation_level=None)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SQLITE_SCHEMA)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTransaction(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._db.execute(sql, tuple(params)).fetchall())

    def close(self) -> None:
        with self._lock:
            self._db.close()


def is_postgres_url(location: str | Path) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """A PostgreSQL URL without its password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"


def open_database(location: str | Path) -> Database:
    """The database at ``location``: a ``postgresql://`` URL, else a SQLite file path."""
    if is_postgres_url(location):
        try:
            from fedhh_coordinator.store_postgres import PostgresDatabase
        except ImportError as error:
            raise ConfigError(f"--db {redact(str(location))} needs the PostgreSQL driver: "
                              f"pip install 'psycopg[binary]' ({error})") from None
        return PostgresDatabase(str(location))
    return SqliteDatabase(location)
