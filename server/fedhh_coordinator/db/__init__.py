"""Where the coordinator's store lives: an embedded SQLite file (the default) or a PostgreSQL
server (``--db postgresql://...``, :mod:`fedhh_coordinator.db.postgres`).

Both speak the same small interface to :class:`~fedhh_coordinator.store.Store`
(:mod:`fedhh_coordinator.db.interface`): one transaction at a time (``Database.transaction``,
committed on exit, rolled back on any exception), reads outside transactions
(``Database.query``), statements written once with
``?`` placeholders and SQL that both engines run alike (``INSERT ... ON CONFLICT DO NOTHING``,
``RETURNING``). The schema is the same tables and columns in each engine's types.
"""

from __future__ import annotations

from pathlib import Path

from fedhh.errors import ConfigError
from fedhh_coordinator.db.interface import (
    Cursor,
    Database,
    Transaction,
    is_postgres_url,
    redact,
)
from fedhh_coordinator.db.sqlite import SqliteDatabase
from fedhh_coordinator.db.tables import no_store_there

__all__ = ["Cursor", "Database", "SqliteDatabase", "Transaction", "check_selector_store",
           "is_postgres_url", "open_database", "redact"]


def open_database(location: str | Path, *, selector: bool = False) -> Database:
    """The database at ``location``: a ``postgresql://`` URL, else a SQLite file path.
    ``selector``: a selector's handle beside the coordinator's (no lock, no schema on
    PostgreSQL; a SQLite file in WAL mode takes several processes on one host, each write
    waiting up to sqlite3's 5 s busy timeout for another's)."""
    if is_postgres_url(location):
        try:
            from fedhh_coordinator.db.postgres import PostgresDatabase
        except ImportError as error:
            raise ConfigError(f"--db {redact(str(location))} needs the PostgreSQL driver: "
                              f"pip install 'psycopg[binary]' ({error})") from None
        return PostgresDatabase(str(location), selector=selector)
    if selector:
        check_selector_store(location)
    return SqliteDatabase(location, create=not selector)


def check_selector_store(location: str | Path) -> None:
    """A selector's --db, as far as it is checked without a connection: a SQLite path is a
    file. A selector reads the coordinator's store: a path with a typo would otherwise make a
    new, empty one (and its folders) and serve devices nobody enrolled."""
    if not is_postgres_url(location) and not Path(location).is_file():
        raise ConfigError(no_store_there(str(location)))
