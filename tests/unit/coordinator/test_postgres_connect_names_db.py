"""A PostgreSQL store that cannot be reached at the start names the option to mend, ``--db``,
its password still hidden. Before, `fedhh coordinator --db postgresql://u:pw@127.0.0.1:9/db`
ended 'cannot connect to postgresql://u:***@127.0.0.1:9/db: connection failed: ...', naming
no option, where every other refusal of the store's location opens with --db. A later
reconnection's failure is an outage of a database that was there (``StoreUnavailable``), not a
wrong --db, and stays said without the option. The driver's connect is faked: no server."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from fedhh.errors import ConfigError
from fedhh_coordinator.db import open_database, postgres
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.db.tables import STORE_COLUMNS

URL = "postgresql://fedhh:s3cret@127.0.0.1:9/fedhh"
REFUSED = psycopg.OperationalError(
    'connection failed: connection to server at "127.0.0.1", port 9 failed: Connection refused')


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise REFUSED


@pytest.mark.parametrize("selector", [False, True], ids=["coordinator", "selector"])
def test_a_store_not_reached_at_the_start_names_db(monkeypatch: pytest.MonkeyPatch,
                                                   selector: bool) -> None:
    monkeypatch.setattr(postgres.psycopg, "connect", _refused)
    with pytest.raises(ConfigError) as refused:
        open_database(URL, selector=selector)
    assert str(refused.value) == (
        "--db: cannot connect to postgresql://fedhh:***@127.0.0.1:9/fedhh: connection failed: "
        'connection to server at "127.0.0.1", port 9 failed: Connection refused')


class _Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchone(self) -> tuple[Any, ...]:
        return self.rows[0]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class _Connection:
    """A connection that answers the start's lock and catalog (it is then broken)."""

    closed = False
    broken = False

    def execute(self, sql: str, params: Any = ()) -> _Rows:
        if "pg_try_advisory_lock" in sql:
            return _Rows([(True,)])
        return _Rows([(t, c) for t, columns in STORE_COLUMNS.items() for c in columns])

    def close(self) -> None:
        self.closed = True


def test_a_reconnection_that_fails_is_an_outage_without_the_option(
        monkeypatch: pytest.MonkeyPatch) -> None:
    conn = _Connection()
    monkeypatch.setattr(postgres.psycopg, "connect", lambda *a, **k: conn)
    db = postgres.PostgresDatabase(URL)
    conn.broken = True
    monkeypatch.setattr(postgres.psycopg, "connect", _refused)
    with pytest.raises(StoreUnavailable) as down:
        db.query("SELECT 1")
    assert str(down.value).startswith(
        "the database is unavailable: cannot connect to postgresql://fedhh:***@127.0.0.1:9/")
