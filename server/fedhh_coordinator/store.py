"""SQLite persistence of the coordinator: devices, runs, rounds, tree states and ledgers.

Every state change is one transaction, so a crash (even kill -9) leaves either the old state or
the new one. The round life cycle and what a restart does with it:

- ``open``: check-in or secure aggregation in progress; nothing was released to us. A restart
  re-runs the round (a new attempt: fresh cohort, fresh keys, fresh randomness).
- ``releasing``: the aggregator started streaming the sum to us; the round's privacy spend was
  recorded in the ledger in the same transaction that set this state (before a single byte of the
  sum was read), so a crash now never loses spend. The sum itself is not stored, so a restart
  cannot continue the run without spending again: the run fails with a message saying so.
- ``released``: the sum was consumed; the new tree state and the ledger were committed together.
- ``aborted``: the aggregator released nothing (too few survivors, an abort, a lost aggregator);
  no spend. The round is retried as a new attempt.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedhh.errors import ConflictError, NotFoundError

SCHEMA = """
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
"""

RUN_STATES = ("pending", "running", "done", "failed", "cancelled")
ACTIVE = ("pending", "running")


@dataclass(frozen=True)
class RunRow:
    run_id: str
    config: dict[str, Any]
    state: str
    eps_local: float
    tree: dict[str, Any]
    ledger: dict[str, Any]
    deny_codes: list[int]
    error: str


@dataclass(frozen=True)
class RoundRow:
    run_id: str
    round: int
    attempt: int
    state: str
    reason: str
    participants: int
    summary: dict[str, Any]
    started_at: float
    finished_at: float | None


class Store:
    """A thread-safe handle on the coordinator's SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ---- devices -------------------------------------------------------------------------
    def add_device(self, credential_hash: bytes, identity_key: bytes, label: str) -> int:
        with self._tx() as db:
            if db.execute("SELECT 1 FROM devices WHERE identity_key = ?",
                          (identity_key,)).fetchone():
                raise ConflictError("this identity key is already enrolled")
            cur = db.execute(
                "INSERT INTO devices (credential_hash, identity_key, label, enrolled_at) "
                "VALUES (?, ?, ?, ?)", (credential_hash, identity_key, label, time.time()))
            return int(cur.lastrowid or 0)

    def device(self, device_id: int) -> tuple[bytes, bytes] | None:
        """(credential hash, identity key) of an enrolled device."""
        with self._lock:
            row = self._db.execute(
                "SELECT credential_hash, identity_key FROM devices WHERE device_id = ?",
                (device_id,)).fetchone()
        return None if row is None else (bytes(row[0]), bytes(row[1]))

    def device_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM devices").fetchone()[0])

    # ---- runs ----------------------------------------------------------------------------
    def create_run(self, run_id: str, config: dict[str, Any], eps_local: float,
                   tree: dict[str, Any], ledger: dict[str, Any], deny_codes: list[int]) -> None:
        now = time.time()
        with self._tx() as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                raise ConflictError(f"run {run_id!r} already exists")
            db.execute(
                "INSERT INTO runs (run_id, config, state, eps_local, tree, ledger, deny_codes, "
                "created_at, updated_at) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?)",
                (run_id, json.dumps(config), eps_local, json.dumps(tree), json.dumps(ledger),
                 json.dumps([str(c) for c in deny_codes]), now, now))

    def run(self, run_id: str) -> RunRow:
        with self._lock:
            row = self._db.execute(
                "SELECT run_id, config, state, eps_local, tree, ledger, deny_codes, error "
                "FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"unknown run {run_id!r}")
        return _run_row(row)

    def runs(self) -> list[RunRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, config, state, eps_local, tree, ledger, deny_codes, error "
                "FROM runs ORDER BY created_at").fetchall()
        return [_run_row(r) for r in rows]

    def set_run_state(self, run_id: str, state: str, error: str = "") -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET state = ?, error = ?, updated_at = ? WHERE run_id = ?",
                       (state, error, time.time(), run_id))

    # ---- rounds --------------------------------------------------------------------------
    def rounds(self, run_id: str) -> list[RoundRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, round, attempt, state, reason, participants, summary, "
                "started_at, finished_at FROM rounds WHERE run_id = ? ORDER BY round, attempt",
                (run_id,)).fetchall()
        return [RoundRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8])
                for r in rows]

    def open_round(self, run_id: str, round_: int) -> int:
        """Start a new attempt of a round; returns its attempt number."""
        with self._tx() as db:
            last = db.execute("SELECT MAX(attempt) FROM rounds WHERE run_id = ? AND round = ?",
                              (run_id, round_)).fetchone()[0]
            attempt = int(last or 0) + 1
            db.execute("INSERT INTO rounds (run_id, round, attempt, state, started_at) "
                       "VALUES (?, ?, ?, 'open', ?)", (run_id, round_, attempt, time.time()))
            db.execute("UPDATE runs SET state = 'running', updated_at = ? WHERE run_id = ? "
                       "AND state = 'pending'", (time.time(), run_id))
            return attempt

    def abort_round(self, run_id: str, round_: int, attempt: int, reason: str,
                    summary: dict[str, Any] | None = None) -> None:
        with self._tx() as db:
            db.execute("UPDATE rounds SET state = 'aborted', reason = ?, summary = ?, "
                       "finished_at = ? WHERE run_id = ? AND round = ? AND attempt = ? "
                       "AND state = 'open'",
                       (reason, json.dumps(summary or {}), time.time(), run_id, round_, attempt))

    def begin_release(self, run_id: str, round_: int, attempt: int, participants: int,
                      ledger: dict[str, Any]) -> None:
        """Record the round's spend (the new ledger) before the sum is read."""
        with self._tx() as db:
            cur = db.execute("UPDATE rounds SET state = 'releasing', participants = ? "
                             "WHERE run_id = ? AND round = ? AND attempt = ? AND state = 'open'",
                             (participants, run_id, round_, attempt))
            if cur.rowcount != 1:
                raise ConflictError(f"round {round_}.{attempt} of {run_id} is not open")
            db.execute("UPDATE runs SET ledger = ?, updated_at = ? WHERE run_id = ?",
                       (json.dumps(ledger), time.time(), run_id))

    def finish_release(self, run_id: str, round_: int, attempt: int, tree: dict[str, Any],
                       summary: dict[str, Any], done: bool) -> None:
        """Commit the round's outcome: the new tree state, its summary, and the run's state."""
        with self._tx() as db:
            cur = db.execute("UPDATE rounds SET state = 'released', summary = ?, finished_at = ? "
                             "WHERE run_id = ? AND round = ? AND attempt = ? "
                             "AND state = 'releasing'",
                             (json.dumps(summary), time.time(), run_id, round_, attempt))
            if cur.rowcount != 1:
                raise ConflictError(f"round {round_}.{attempt} of {run_id} is not releasing")
            db.execute("UPDATE runs SET tree = ?, state = ?, updated_at = ? WHERE run_id = ?",
                       (json.dumps(tree), "done" if done else "running", time.time(), run_id))

    def interrupted_rounds(self, run_id: str) -> list[RoundRow]:
        """Rounds left 'open' or 'releasing' by a previous process."""
        return [r for r in self.rounds(run_id) if r.state in ("open", "releasing")]


def _run_row(row: tuple[Any, ...]) -> RunRow:
    return RunRow(row[0], json.loads(row[1]), row[2], float(row[3]), json.loads(row[4]),
                  json.loads(row[5]), [int(c) for c in json.loads(row[6])], row[7])
