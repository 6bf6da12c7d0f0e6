"""A PostgreSQL store whose pages or indexes do not read back (SQLSTATE XX001 data_corrupted,
XX002 index_corrupted) is the store damaged, said as the SQLite store says its own
(``StoreCorrupt``, DATA_LOSS, naming the database without its password and what to do). Before,
psycopg's InternalError went up as a bug: INTERNAL to callers, and the run under way failed for
good ("internal error: invalid page in block 7 ..."). The driver is faked: its errors carry the
SQLSTATE, which is all the store reads of them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import psycopg.errors
import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.errors import status_of
from fedhh_coordinator.db import postgres
from fedhh_coordinator.db.interface import StoreCorrupt
from fedhh_coordinator.db.tables import STORE_COLUMNS

URL = "postgresql://fedhh:s3cret@db.example:5432/fedhh"
HEAP = psycopg.errors.DataCorrupted(
    'invalid page in block 7 of relation base/16384/16400')
INDEX = psycopg.errors.IndexCorrupted('index "runs_pkey" contains unexpected zero page')


class _Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class _Connection:
    """What the store calls of a psycopg connection; the store's own statements raise
    ``failing`` once set (``catalog``: the catalog read at start raises it)."""

    closed = False
    broken = False

    def __init__(self, failing: Exception | None = None, catalog: bool = False) -> None:
        self.failing, self.catalog = failing, catalog
        self.rolled_back = 0

    def execute(self, sql: str, params: Any = ()) -> _Rows:
        if "pg_try_advisory_lock" in sql:
            return _Rows([(True,)])
        if "information_schema" in sql:
            if self.catalog and self.failing is not None:
                raise self.failing
            return _Rows([(t, c) for t, columns in STORE_COLUMNS.items() for c in columns])
        if self.failing is not None and not self.catalog:
            raise self.failing
        return _Rows([])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.rolled_back += 1
            raise

    def close(self) -> None:
        self.closed = True


def _database(monkeypatch: pytest.MonkeyPatch, conn: _Connection) -> postgres.PostgresDatabase:
    monkeypatch.setattr(postgres.psycopg, "connect", lambda *a, **k: conn)
    return postgres.PostgresDatabase(URL)


@pytest.mark.parametrize("error", [HEAP, INDEX], ids=["XX001", "XX002"])
def test_a_damaged_page_or_index_is_the_store_corrupt(monkeypatch: pytest.MonkeyPatch,
                                                      error: psycopg.Error) -> None:
    conn = _Connection()
    db = _database(monkeypatch, conn)
    conn.failing = error
    with pytest.raises(StoreCorrupt) as read:
        db.query("SELECT run_id FROM runs")
    with pytest.raises(StoreCorrupt) as written, db.transaction() as tx:
        tx.execute("UPDATE runs SET state = ? WHERE run_id = ?", ("done", "r"))
    assert conn.rolled_back == 1  # (nothing of the transaction stays)
    for caught in (read.value, written.value):
        message = str(caught)
        assert status_of(caught) == grpc.StatusCode.DATA_LOSS  # (was INTERNAL)
        assert "postgresql://fedhh:***@db.example:5432/fedhh" in message
        assert "s3cret" not in message
        assert f"SQLSTATE {error.sqlstate}" in message and str(error) in message
        assert "it is left as it is" in message
        assert ("REINDEX" in message) == (error is INDEX)


def test_a_catalog_that_does_not_read_back_refuses_the_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    conn = _Connection(HEAP, catalog=True)
    with pytest.raises(ConfigError, match=r"^--db: the store postgresql://fedhh:\*\*\*@"
                                          r"db\.example:5432/fedhh is damaged \(SQLSTATE "
                                          r"XX001"):
        _database(monkeypatch, conn)
    assert conn.closed
