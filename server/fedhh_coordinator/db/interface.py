"""What the coordinator's store asks of a database engine (:mod:`fedhh_coordinator.db`): one
transaction at a time, reads outside transactions, statements with ``?`` placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import grpc

from fedhh.errors import FedhhError

__all__ = ["Cursor", "Database", "StoreUnavailable", "Transaction", "is_postgres_url",
           "redact"]


class StoreUnavailable(FedhhError):
    """The database connection failed during an operation (nothing of it was committed), or
    could not be made again for it: a caller's request was not at fault (UNAVAILABLE, worth
    a retry; it was INVALID_ARGUMENT), and a run waits for the database (``Runner``)."""

    grpc_status = grpc.StatusCode.UNAVAILABLE


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


def is_postgres_url(location: str | Path) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """A PostgreSQL URL without its password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
