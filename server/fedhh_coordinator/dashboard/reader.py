"""The dashboard's read-only view of the coordinator's SQLite file, for what ``Store`` does not
offer: when runs were started and last changed, the enrolled devices and enrollment tokens, and
each device's lifetime charges.

The connection is opened in SQLite's read-only mode (``mode=ro``) with ``query_only`` on, so
nothing the dashboard does can write the file, whatever a bug in it might try. WAL mode lets it
read while the coordinator writes.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedhh.errors import ConfigError


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
    def __init__(self, path: str | Path) -> None:
        if str(path) == ":memory:":
            raise ConfigError("the dashboard reads the coordinator's --db file; an in-memory "
                              "database cannot be shared")
        uri = Path(path).resolve().as_uri() + "?mode=ro"
        try:
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._db.execute("PRAGMA query_only=ON")
        except sqlite3.Error as error:
            raise ConfigError(f"the dashboard cannot read {path}: {error}") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _all(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def run_times(self) -> dict[str, RunTimes]:
        rows = self._all("SELECT run_id, created_at, updated_at FROM runs")
        return {str(r[0]): RunTimes(float(r[1]), float(r[2])) for r in rows}

    def fleet(self) -> FleetCounts:
        now = time.time()
        devices, first, last = self._all(
            "SELECT COUNT(*), MIN(enrolled_at), MAX(enrolled_at) FROM devices")[0]
        tokens, used, expired = self._all(
            "SELECT COUNT(*), COUNT(used_by), "
            "COALESCE(SUM(used_by IS NULL AND expires_at IS NOT NULL AND expires_at < ?), 0) "
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
            "ON d.device_id = s.device_id WHERE s.charged_at >= ? GROUP BY s.device_id "
            "ORDER BY SUM(s.eps) DESC, s.device_id", (since,))
        return [DeviceCharge(int(r[0]), str(r[1]), float(r[2]), float(r[3]),
                             int(r[4]), float(r[5]))
                for r in rows]
