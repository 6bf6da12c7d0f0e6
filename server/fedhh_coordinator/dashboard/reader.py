"""The dashboard's read-only view of the coordinator's database, for what ``Store`` does not
offer: when runs were started and last changed, the enrolled devices and enrollment tokens, and
each device's lifetime charges.

Its own connection can only read, whatever a bug in the dashboard might try: a SQLite file is
opened in read-only mode (``mode=ro``) with ``query_only`` on (WAL mode lets it read while the
coordinator writes); a PostgreSQL database (``postgresql://``) through a session whose
transactions are all read-only (``default_transaction_read_only``), without the coordinator's
advisory lock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedhh.errors import ConfigError
from fedhh_coordinator.db import is_postgres_url


@dataclass(frozen=True)
class RunTimes:
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class Enrolled:
    device_id: int
    label: str
    enrolled_at: float


@dataclass(frozen=True)
class FleetCounts:
    devices: int
    first_enrolled: float | None
    last_enrolled: float | None
    tokens: int
    tokens_used: int
    tokens_expired: int  # unused and past their expiry


@dataclass(frozen=True)
class DeviceCharge:
    """A device's charges in the budget period: summed (eps, delta) over its runs."""

    device_id: int
    label: str
    eps: float
    delta: float
    runs: int
    last_charged: float


class Reader:
    def __init__(self, location: str | Path) -> None:
        self._lock = threading.Lock()
        self._query: Callable[[str, tuple[object, ...]], list[tuple[Any, ...]]]
        self._close: Callable[[], None]
        if is_postgres_url(location):
            from fedhh_coordinator.db.postgres import PostgresDatabase

            database = PostgresDatabase(str(location), read_only=True)
            self._query, self._close = database.query, database.close
            return
        if str(location) == ":memory:":
            raise ConfigError("the dashboard reads the coordinator's --db file; an in-memory "
                              "database cannot be shared")
        uri = Path(location).resolve().as_uri() + "?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            db.execute("PRAGMA query_only=ON")
        except sqlite3.Error as error:
            raise ConfigError(f"the dashboard cannot read {location}: {error}") from None

        def query(sql: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
            with self._lock:
                return db.execute(sql, args).fetchall()

        self._query, self._close = query, db.close

    def close(self) -> None:
        self._close()

    def _all(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        return self._query(sql, args)

    def run_times(self) -> dict[str, RunTimes]:
        rows = self._all("SELECT run_id, created_at, updated_at FROM runs")
        return {str(r[0]): RunTimes(float(r[1]), float(r[2])) for r in rows}

    def fleet(self) -> FleetCounts:
        now = time.time()
        devices, first, last = self._all(
            "SELECT COUNT(*), MIN(enrolled_at), MAX(enrolled_at) FROM devices")[0]
        tokens, used, expired = self._all(
            "SELECT COUNT(*), COUNT(used_by), "
            "COALESCE(SUM(CASE WHEN used_by IS NULL AND expires_at IS NOT NULL AND "
            "expires_at < ? THEN 1 ELSE 0 END), 0) "
            "FROM enrollment_tokens", (now,))[0]
        return FleetCounts(int(devices), first, last,
                           int(tokens), int(used), int(expired))

    def recent_enrollments(self, limit: int) -> list[Enrolled]:
        rows = self._all("SELECT device_id, label, enrolled_at FROM devices "
                         "ORDER BY device_id DESC LIMIT ?", (limit,))
        return [Enrolled(int(r[0]), str(r[1]), float(r[2])) for r in rows]

    def device_charges(self, since: float) -> list[DeviceCharge]:
        """Every device charged since ``since``, most charged first."""
        rows = self._all(
            "SELECT s.device_id, COALESCE(d.label, ''), SUM(s.eps), SUM(s.delta), COUNT(*), "
            "MAX(s.charged_at) FROM device_spends s LEFT JOIN devices d "
            "ON d.device_id = s.device_id WHERE s.charged_at >= ? GROUP BY s.device_id, d.label "
            "ORDER BY SUM(s.eps) DESC, s.device_id", (since,))
        return [DeviceCharge(int(r[0]), str(r[1]), float(r[2]), float(r[3]),
                             int(r[4]), float(r[5]))
                for r in rows]
