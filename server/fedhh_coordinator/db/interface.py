"""What the coordinator's store asks of a database engine (:mod:`fedhh_coordinator.db`): one
transaction at a time, reads outside transactions, statements with ``?`` placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

import grpc

from fedhh.errors import FedhhError, StoreDamaged

__all__ = ["Cursor", "Database", "StoreCorrupt", "StoreUnavailable", "Transaction",
           "is_postgres_url", "redact", "redact_text"]


class StoreUnavailable(FedhhError):
    """The database connection failed during an operation (nothing of it was committed), or
    could not be made again for it: a caller's request was not at fault (UNAVAILABLE, worth
    a retry; it was INVALID_ARGUMENT), and a run waits for the database (``Runner``)."""

    grpc_status = grpc.StatusCode.UNAVAILABLE


class StoreCorrupt(StoreDamaged):
    """The database's file does not read back (SQLite's "database disk image is malformed": a
    changed or lost page, a file cut short), found by an operation that read the damaged part
    (DATA_LOSS). Unlike a damaged field of one run's row (``StoreDamaged``, which fails that
    run alone), no run is at fault and no write should go to such a file: the runner stops the
    coordinator, the store left as it is (before, the run under way was failed for good,
    "internal error: database disk image is malformed", or the coordinator stopped with a
    traceback; callers were told INTERNAL)."""


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


# The URL's query parameters that hold a secret (libpq's names; any case).
_SECRET_PARAMETERS = re.compile(r"([?&](?:ssl)?password=)([^&]*)", re.IGNORECASE)


def redact(url: str) -> str:
    """A PostgreSQL URL without its passwords (the user's, and ``password=`` or
    ``sslpassword=`` in its query), for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest = _SECRET_PARAMETERS.sub(r"\1***", rest)
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return f"{scheme}://{rest}"
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"


def redact_text(text: str, url: str) -> str:
    """``text`` (a driver's message about ``url``) with the URL and each of its passwords, as
    written and percent-decoded, replaced (the driver quotes the token it could not parse,
    which may be the password, or the whole URL)."""
    _, sep, rest = url.partition("://")
    secrets = [value for _, value in _SECRET_PARAMETERS.findall(rest)] if sep else []
    credentials = _SECRET_PARAMETERS.sub("", rest).rpartition("@")[0] if sep else ""
    if ":" in credentials:
        secrets.append(credentials.split(":", 1)[1])
    text = text.replace(url, redact(url))
    for secret in sorted({s for raw in secrets for s in (raw, unquote(raw)) if s},
                         key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
