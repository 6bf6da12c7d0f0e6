"""Persistence of the coordinator: devices, runs, round attempts, tree states, ledgers, in an
embedded SQLite file (the default) or on a PostgreSQL server (``postgresql://...``; the
engines are :mod:`fedhh_coordinator.db`).

Every state change is one transaction, so a crash (even kill -9) leaves either the old state or
the new one. An attempt's states are those of ``fedhh.rounds.AttemptState`` (open, releasing,
released, aborted, lost); ``RunAttempts`` is the round driver's ``RunStore`` over this file.
What a restart does with an attempt left open or releasing is the driver's rule
(``RoundDriver.resume``): it asks the aggregator what became of it, and charges it if
unmasking began.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from fedhh.errors import AuthenticationError, ConflictError, NotFoundError, StoreDamaged, shown
from fedhh.rounds import AttemptRecord, AttemptState
from fedhh_coordinator.db import Database, open_database

RUN_STATES = ("pending", "running", "done", "failed", "cancelled")
T = TypeVar("T")
ACTIVE = ("pending", "running")
# How long after its enrollment a device may present the same token and identity key again
# to have its credential re-issued (its first answer lost on the way). Bounded so that a token
# leaking later (a tokens file left behind) cannot take over the device's credential: past
# it, a used token is worth nothing, as before.
REISSUE_WINDOW_S = 15 * 60


# A run's id: what an operator types and what names it in logs, URLs and file names. Matched
# whole (``fullmatch``): ``^...$`` took "r1\n", a second run that lists as "r1" does.
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
RUN_ID_RULE = "1 to 64 characters of A-Z, a-z, 0-9, _ and -"


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
class RunHead:
    """What of a run's row changes as it runs (its state, tree state, ledger and error), with
    its fixed eps_local and its times: ``Store.run_head``, which leaves out its config and deny
    list (with 1,000,000 items, ~3 s of decoding a read whole). ``created_at`` tells the run
    from any other of its id, and so keys what is kept of its config (``runs.RunFixed``)."""
    run_id: str
    state: str
    eps_local: float
    tree: dict[str, Any]
    ledger: dict[str, Any]
    error: str
    created_at: float
    updated_at: float


# A cohort's members in its attempt's round summary: their device ids as big-endian 64-bit
# integers, base64. As a JSON list they made each read of the summary decode one number per
# member, and GetRun (a load test polls it twice a second, as does the dashboard) reads every
# round's summary: ~5 ms a read at 100,000 members, ~0.07 ms of the coordinator's CPU per
# device over a 100,000-device round, growing with n (docs/benchmarks.md).
MEMBERS_KEY = "members_i64"
_MEMBER_DTYPE = np.dtype(">i8")
# Whose reports an attempt's charge was over, in its round summary (``Store.charge_round``).
CHARGED_OVER = "charged_over"


def stored_members_field(members: Sequence[int]) -> dict[str, str]:
    """The summary field that names a cohort's ``members`` (see :func:`stored_members`)."""
    return {MEMBERS_KEY: base64.b64encode(
        np.asarray(members, dtype=_MEMBER_DTYPE).tobytes()).decode()}


def stored_members(stored: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The device ids a stored cohort names, packed (``MEMBERS_KEY``) or as the JSON list
    summaries written before held (``"members"``); None if it names none."""
    if MEMBERS_KEY in stored:
        packed = base64.b64decode(stored[MEMBERS_KEY], validate=True)
        return tuple(np.frombuffer(packed, dtype=_MEMBER_DTYPE).tolist())
    if "members" in stored:
        return tuple(int(d) for d in stored["members"])
    return None


@dataclass(frozen=True)
class RoundRow:
    run_id: str
    round: int
    attempt: int
    state: str
    reason: str
    participants: int  # the count charged (docs/scaling.md: n_min for a shard lost)
    summary: dict[str, Any]
    started_at: float
    finished_at: float | None

    @property
    def contributors(self) -> int:
        """The reports in a released round's total, which its estimates are over (its tree
        report's ``participants``); else the charge. The two differ where a shard reached
        unmasking outside the total: charged at n_min, whatever the total's count."""
        if self.state != "released":
            return self.participants
        return int(self.summary.get("participants", self.participants))


# The most hashes one ``IN (...)`` list names: within SQLite's 32,766 host parameters (999
# before its 3.32) and PostgreSQL's 65,535.
_IN_LIST = 500


@dataclass(frozen=True)
class EnrollmentCounts:
    devices: int
    last_enrolled_at: float  # 0.0: none yet
    tokens_unused: int
    tokens_used: int
    tokens_expired: int


class Store:
    """A thread-safe handle on the coordinator's database: a SQLite file path or a
    ``postgresql://`` URL (or an open :class:`~fedhh_coordinator.db.Database`)."""

    def __init__(self, location: str | Path | Database, *, selector: bool = False) -> None:
        self.db = location if not isinstance(location, str | Path) \
            else open_database(location, selector=selector)
        self.path = self.db.location

    def close(self) -> None:
        self.db.close()

    def _tx(self) -> Any:
        return self.db.transaction()

    # ---- devices -------------------------------------------------------------------------
    def add_device(self, credential_hash: bytes, identity_key: bytes, label: str,
                   token_hash: bytes | None = None) -> int:
        """Enroll a device; with ``token_hash``, consume that one-time enrollment token in the
        same transaction (AuthenticationError if it is unknown, used or expired).

        The token that enrolled ``identity_key``, presented with it again within
        ``REISSUE_WINDOW_S``, is the device retrying an enrollment whose answer it lost: the
        same device id is returned and ``credential_hash`` replaces the first credential's
        (only the lost answer carried that credential; the store keeps nothing it could be
        sent again from). Any other token with an enrolled key is a ConflictError, and so is
        a re-issue that crossed another of the same key: the store replaces only the
        credential it read, so that of two enrollments in two processes at once one keeps its
        credential and the other is told so (before, at PostgreSQL's READ COMMITTED, both were
        answered and the later commit replaced the credential of the earlier answer)."""
        now = time.time()
        with self._tx() as db:
            enrolled = db.execute(
                "SELECT device_id, credential_hash FROM devices WHERE identity_key = ?",
                (identity_key,)).fetchone()
            if enrolled is not None:
                device_id = int(enrolled[0])
                if token_hash is None or not db.execute(
                        "SELECT 1 FROM enrollment_tokens WHERE token_hash = ? AND used_by = ? "
                        "AND used_at >= ?",
                        (token_hash, device_id, now - REISSUE_WINDOW_S)).fetchone():
                    raise ConflictError(
                        f"this identity key is already enrolled (by another token, or more "
                        f"than {REISSUE_WINDOW_S // 60} minutes ago by this one)")
                if db.execute("UPDATE devices SET credential_hash = ? WHERE device_id = ? AND "
                              "credential_hash = ?",
                              (credential_hash, device_id, bytes(enrolled[1]))).rowcount != 1:
                    raise ConflictError(
                        "this identity key's credential was re-issued by another enrollment "
                        "of it at the same moment (a retry beside the call it repeats, in "
                        "another process): the credential of that answer is kept; if that "
                        "answer was lost, send the same request again")
                return device_id
            if token_hash is not None:
                row = db.execute("SELECT used_by, expires_at FROM enrollment_tokens WHERE "
                                 "token_hash = ?", (token_hash,)).fetchone()
                if row is None or row[0] is not None:
                    raise AuthenticationError("unknown or already used enrollment token")
                if row[1] is not None and row[1] < now:
                    raise AuthenticationError("expired enrollment token")
            # (no row: another connection, a selector's, enrolled this key meanwhile; its
            # unique index made the INSERT wait for that commit, and it was a driver error)
            inserted = db.execute(
                "INSERT INTO devices (credential_hash, identity_key, label, enrolled_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (identity_key) DO NOTHING RETURNING device_id",
                (credential_hash, identity_key, label, now)).fetchone()
            if inserted is None:
                raise ConflictError("this identity key is already enrolled (by another token, "
                                    "at the same moment)")
            device_id = int(inserted[0])
            # Taken only while still unused: a selector's enrolment (another connection) may
            # have read the row as unused too and committed first; at PostgreSQL's READ
            # COMMITTED this UPDATE then finds the row taken, and the device goes with the
            # rollback (an UPDATE by token_hash alone overwrote used_by: two identities).
            if token_hash is not None and db.execute(
                    "UPDATE enrollment_tokens SET used_by = ?, used_at = ? WHERE "
                    "token_hash = ? AND used_by IS NULL",
                    (device_id, now, token_hash)).rowcount != 1:
                raise AuthenticationError("unknown or already used enrollment token")
            return device_id

    def add_enrollment_tokens(self, token_hashes: list[bytes], label: str = "",
                              expires_at: float | None = None) -> int:
        """Register one-time enrollment tokens (by hash; known ones are left as they are);
        returns how many were new."""
        return len(self.add_new_enrollment_tokens(token_hashes, label, expires_at))

    def add_new_enrollment_tokens(self, token_hashes: list[bytes], label: str = "",
                                  expires_at: float | None = None) -> list[bytes]:
        """``add_enrollment_tokens``, answering the hashes that were new: what a batched
        import that fails takes out again, leaving the tokens known before it as they were."""
        with self._tx() as db:
            known: set[bytes] = set()
            for start in range(0, len(token_hashes), _IN_LIST):
                part = token_hashes[start:start + _IN_LIST]
                known.update(bytes(r[0]) for r in db.execute(
                    "SELECT token_hash FROM enrollment_tokens WHERE token_hash IN "
                    f"({', '.join('?' * len(part))})", part).fetchall())
            new = [h for h in dict.fromkeys(token_hashes) if h not in known]
            db.executemany(
                "INSERT INTO enrollment_tokens (token_hash, label, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING", [(h, label, expires_at) for h in new])
            return new

    # Each mint a caller named (``MintEnrollmentTokensRequest.request_id``): what it asked for
    # and the hashes of every token drawn under the id, so that a repeat takes out those
    # nobody received. A table of its own, made when first needed (only the coordinator
    # mints): stores made before it are stores all the same (``db.tables.STORE_COLUMNS``).
    _MINT_TABLE = ("CREATE TABLE IF NOT EXISTS token_mints (request_id TEXT PRIMARY KEY, "
                   "asked TEXT NOT NULL, hashes TEXT NOT NULL)")

    def record_mint(self, request_id: str, asked: dict[str, Any],
                    token_hashes: list[bytes]) -> list[bytes]:
        """Record that the tokens of ``token_hashes`` are minted under ``request_id``, which
        asks for ``asked``, before any is stored; returns the hashes its earlier mints drew
        (none: a new id). ConflictError, nothing recorded, if the id asked for another
        ``asked`` (the fields that differ named)."""
        with self._tx() as db:
            db.execute(self._MINT_TABLE)
            row = db.execute("SELECT asked, hashes FROM token_mints WHERE request_id = ?",
                             (request_id,)).fetchone()
            earlier: list[bytes] = []
            if row is not None:
                record = f"mint {request_id!r}"
                before = decoded(record, "asked", _object, row[0])
                differ = sorted(k for k in {*before, *asked} if before.get(k) != asked.get(k))
                if differ:
                    raise ConflictError(
                        f"mint {request_id!r} already asked for another {', '.join(differ)}: "
                        f"a repeat of a mint asks for the same count, ttl_s and label; give "
                        f"another request id for another mint")
                packed = decoded(record, "hashes", base64.b64decode, row[1])
                earlier = [packed[i:i + 32] for i in range(0, len(packed), 32)]
            db.execute("DELETE FROM token_mints WHERE request_id = ?", (request_id,))
            db.execute("INSERT INTO token_mints (request_id, asked, hashes) VALUES (?, ?, ?)",
                       (request_id, json.dumps(asked),
                        base64.b64encode(b"".join(earlier + token_hashes)).decode()))
            return earlier

    def remove_enrollment_tokens(self, token_hashes: list[bytes]) -> int:
        """Take out the tokens of ``token_hashes`` that enrolled nobody (a mint that failed
        midway: nobody was given them); returns how many."""
        with self._tx() as db:
            return int(db.executemany(
                "DELETE FROM enrollment_tokens WHERE token_hash = ? AND used_by IS NULL",
                [(h,) for h in token_hashes]))

    def enrollment(self, now: float | None = None) -> EnrollmentCounts:
        """How many devices are enrolled (and when the latest was), and the enrollment
        tokens by fate at ``now`` (default: the clock): unused, used, expired unused."""
        now = time.time() if now is None else now
        with self._tx() as db:
            devices, last = db.execute(
                "SELECT COUNT(*), MAX(enrolled_at) FROM devices").fetchone()
            unused, used, expired = db.execute(
                "SELECT "
                "COALESCE(SUM(CASE WHEN used_by IS NULL AND (expires_at IS NULL OR "
                "expires_at >= ?) THEN 1 ELSE 0 END), 0), "
                "COALESCE(SUM(CASE WHEN used_by IS NOT NULL THEN 1 ELSE 0 END), 0), "
                "COALESCE(SUM(CASE WHEN used_by IS NULL AND expires_at < ? THEN 1 ELSE 0 "
                "END), 0) FROM enrollment_tokens", (now, now)).fetchone()
        return EnrollmentCounts(int(devices), float(last or 0.0), int(unused), int(used),
                                int(expired))

    # ---- the coordinator's signing key ---------------------------------------------------
    # Devices pin the coordinator's public key when they enroll and refuse every task signed
    # by another. The store records the key it was first served with, so that a coordinator
    # started over it with another key (a key file lost with its volume, and a new one made in
    # its place; another file named) is refused at start instead of running rounds that every
    # enrolled device refuses. A table of its own, made when first needed: stores made before
    # it are stores all the same (``db.tables.STORE_COLUMNS``).
    _KEY_TABLE = "CREATE TABLE IF NOT EXISTS coordinator_key (public_key TEXT NOT NULL)"

    def signing_key(self) -> tuple[bytes | None, int]:
        """The raw public key recorded for this store's devices (None: none recorded yet)
        and how many devices are enrolled."""
        with self._tx() as db:
            db.execute(self._KEY_TABLE)
            row = db.execute("SELECT public_key FROM coordinator_key").fetchone()
            count = int(db.execute("SELECT COUNT(*) FROM devices").fetchone()[0])
        if row is None:
            return None, count
        return decoded("the coordinator's key", "public_key", bytes.fromhex, row[0]), count

    def record_signing_key(self, public: bytes) -> None:
        """Record ``public`` as the key of this store's devices (in place of any recorded:
        the caller checked that no enrolled device pinned another)."""
        with self._tx() as db:
            db.execute(self._KEY_TABLE)
            db.execute("DELETE FROM coordinator_key")
            db.execute("INSERT INTO coordinator_key (public_key) VALUES (?)", (public.hex(),))

    # ---- lifetime budgets ---------------------------------------------------------------
    def charge_devices(self, run_id: str, device_ids: list[int], eps: float,
                       delta: float) -> None:
        """Charge each device the run's (eps, delta), once per run."""
        now = time.time()
        with self._tx() as db:
            db.executemany("INSERT INTO device_spends (device_id, run_id, eps, delta, "
                           "charged_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                           [(d, run_id, eps, delta, now) for d in device_ids])

    def device_spends(self, since: float, exclude_run: str = "") -> dict[int, tuple[float, float]]:
        """Each device's summed (eps, delta) over the runs charged since ``since``."""
        rows = self.db.query(
            "SELECT device_id, SUM(eps), SUM(delta) FROM device_spends WHERE charged_at >= ? "
            "AND run_id != ? GROUP BY device_id", (since, exclude_run))
        return {int(d): (float(e), float(dl)) for d, e, dl in rows}

    def device_spend_terms(self, since: float, exclude_run: str = ""
                           ) -> dict[int, list[tuple[float, float, int]]]:
        """Each device's charges since ``since`` as (eps, delta, runs charged them), for a sum
        taken exactly (``budgets.RunAdmission``): SQL's SUM of doubles rounds each addition,
        and SQLite and PostgreSQL round differently."""
        rows = self.db.query(
            "SELECT device_id, eps, delta, COUNT(*) FROM device_spends WHERE charged_at >= ? "
            "AND run_id != ? GROUP BY device_id, eps, delta", (since, exclude_run))
        terms: dict[int, list[tuple[float, float, int]]] = {}
        for d, e, dl, k in rows:
            terms.setdefault(int(d), []).append((float(e), float(dl), int(k)))
        return terms

    def raise_run_charge(self, run_id: str, eps: float) -> int:
        """Raise each device's charge for ``run_id`` to ``eps`` where it is lower (a run whose
        ledger ended above its target: ``budgets.settle_run_charge``); the rows raised."""
        with self._tx() as db:
            return int(db.execute("UPDATE device_spends SET eps = ? WHERE run_id = ? AND eps < ?",
                                  (eps, run_id, eps)).rowcount)

    def device(self, device_id: int) -> tuple[bytes, bytes] | None:
        """(credential hash, identity key) of an enrolled device."""
        rows = self.db.query(
            "SELECT credential_hash, identity_key FROM devices WHERE device_id = ?", (device_id,))
        return None if not rows else (bytes(rows[0][0]), bytes(rows[0][1]))

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
        return _run_row(self._run_columns(
            run_id, "run_id, config, state, eps_local, tree, ledger, deny_codes, error"))

    def run_head(self, run_id: str) -> RunHead:
        """``RunHead`` of the run: its row less its config and deny list, which never change
        once stored (NotFoundError, StoreDamaged as ``run``)."""
        r = self._run_columns(
            run_id, "run_id, state, eps_local, tree, ledger, error, created_at, updated_at")
        record = f"run {run_id!r}"
        return RunHead(r[0], decoded(record, "state", _run_state, r[1]),
                       decoded(record, "eps_local", _real, r[2]),
                       decoded(record, "tree", _object, r[3]),
                       decoded(record, "ledger", _object, r[4]), r[5], float(r[6]), float(r[7]))

    def run_config(self, run_id: str) -> dict[str, Any]:
        """The run's stored config alone (NotFoundError, StoreDamaged as ``run``): its deny
        codes not decoded, which ``run`` does (~3 s with 1,000,000 items)."""
        return decoded(f"run {run_id!r}", "config", _object,
                       self._run_columns(run_id, "config")[0])

    def _run_columns(self, run_id: str, columns: str) -> tuple[Any, ...]:
        """``columns`` of the run's row (NotFoundError if there is none)."""
        _refuse_nul(run_id)
        rows = self.db.query(f"SELECT {columns} FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise NotFoundError(f"unknown run {shown(run_id)}")
        return tuple(rows[0])

    def run_state(self, run_id: str) -> str:
        """The run's state now, its row not read whole (``run`` decodes its deny list)."""
        return str(self._run_columns(run_id, "state")[0])

    def run_created_at(self, run_id: str) -> float:
        """When the run was created in this store (unix seconds): what tells it from a run of
        the same id in another store (``link.run_tag``)."""
        return float(self._run_columns(run_id, "created_at")[0])

    def run_states(self, states: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """(run id, state) of every run, or of those in one of ``states``, oldest first: what
        a list needs before it reads each run (``run``), so that one damaged run spoils only
        itself."""
        where = "" if states is None else f"WHERE state IN ({', '.join('?' * len(states))}) "
        return [(str(r[0]), str(r[1])) for r in self.db.query(
            f"SELECT run_id, state FROM runs {where}ORDER BY created_at, run_id",
            tuple(states or ()))]

    def set_run_state(self, run_id: str, state: str, error: str = "") -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET state = ?, error = ?, updated_at = ? WHERE run_id = ?",
                       (state, error, time.time(), run_id))

    def ask_cancel(self, run_id: str, note: str) -> bool:
        """Record that the operator cancelled a running run (its ``error`` holds ``note`` while
        the round under way ends), so that a coordinator restarted before then still cancels
        it. Only a run still running is marked; False if it no longer was."""
        with self._tx() as db:
            changed = db.execute("UPDATE runs SET error = ?, updated_at = ? WHERE run_id = ? "
                                 "AND state = 'running'", (note, time.time(), run_id))
            return bool(changed.rowcount)

    # ---- round attempts -------------------------------------------------------------------
    def rounds(self, run_id: str) -> list[RoundRow]:
        rows = self.db.query(
            "SELECT run_id, round, attempt, state, reason, participants, summary, "
            "started_at, finished_at FROM rounds WHERE run_id = ? ORDER BY round, attempt",
            (run_id,))
        return [RoundRow(r[0], r[1], r[2], r[3], r[4], r[5],
                         decoded(f"round {r[1]}.{r[2]} of run {run_id!r}", "summary", _object,
                                  r[6]), r[7], r[8])
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

    def annotate_round(self, run_id: str, round_: int, attempt: int,
                       info: dict[str, Any]) -> None:
        """Merge ``info`` into an open attempt's summary (what a restart needs to settle it)."""
        with self._tx() as db:
            row = db.execute("SELECT summary FROM rounds WHERE run_id = ? AND round = ? AND "
                             "attempt = ?", (run_id, round_, attempt)).fetchone()
            if row is None:
                raise NotFoundError(f"no attempt {round_}.{attempt} of {run_id}")
            summary = {**json.loads(row[0]), **info}
            db.execute("UPDATE rounds SET summary = ? WHERE run_id = ? AND round = ? AND "
                       "attempt = ?", (json.dumps(summary), run_id, round_, attempt))

    def abort_round(self, run_id: str, round_: int, attempt: int, reason: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE rounds SET state = 'aborted', reason = ?, finished_at = ? "
                       "WHERE run_id = ? AND round = ? AND attempt = ? AND state = 'open'",
                       (reason, time.time(), run_id, round_, attempt))

    def charge_round(self, run_id: str, round_: int, attempt: int, state: str,
                     participants: int | None, ledger: dict[str, Any], reason: str = "",
                     over: str | None = None) -> None:
        """Record an attempt's charge and the run's new ledger in one transaction: ``state``
        'releasing' (its sum is about to be read) or 'lost' (unmasking began, no sum for us).
        ``over``: whose reports the charge is over (``fedhh.rounds.ChargeHook``), kept in the
        attempt's summary (``CHARGED_OVER``) for a restart to compare; None keeps the one
        recorded. (In the summary, not a column: a store written before it was kept opens
        as it is, its attempts charged with none.)"""
        if state not in ("releasing", "lost"):
            raise ValueError(f"a charged attempt is releasing or lost, not {state!r}")
        with self._tx() as db:
            summary = None
            if over is not None:
                row = db.execute("SELECT summary FROM rounds WHERE run_id = ? AND round = ? "
                                 "AND attempt = ?", (run_id, round_, attempt)).fetchone()
                if row is not None:
                    summary = json.dumps({**json.loads(row[0]), CHARGED_OVER: over})
            cur = db.execute(
                "UPDATE rounds SET state = ?, reason = ?, "
                "participants = COALESCE(?, participants), finished_at = ?, "
                "summary = COALESCE(?, summary) "
                "WHERE run_id = ? AND round = ? AND attempt = ? AND state IN ('open', "
                "'releasing')",
                (state, reason, participants, time.time() if state == "lost" else None,
                 summary, run_id, round_, attempt))
            if cur.rowcount != 1:
                raise ConflictError(f"round {round_}.{attempt} of {run_id} is not open")
            if ledger:
                db.execute("UPDATE runs SET ledger = ?, updated_at = ? WHERE run_id = ?",
                           (json.dumps(ledger), time.time(), run_id))

    def release_round(self, run_id: str, round_: int, attempt: int, tree: dict[str, Any],
                      summary: dict[str, Any], done: bool) -> None:
        """Commit the round's outcome: the new tree state, its summary, and the run's state."""
        with self._tx() as db:
            row = db.execute("SELECT summary FROM rounds WHERE run_id = ? AND round = ? AND "
                             "attempt = ? AND state = 'releasing'",
                             (run_id, round_, attempt)).fetchone()
            if row is None:
                raise ConflictError(f"round {round_}.{attempt} of {run_id} is not releasing")
            merged = {**json.loads(row[0]), **summary}
            db.execute("UPDATE rounds SET state = 'released', summary = ?, finished_at = ? "
                       "WHERE run_id = ? AND round = ? AND attempt = ?",
                       (json.dumps(merged), time.time(), run_id, round_, attempt))
            db.execute("UPDATE runs SET tree = ?, state = ?, updated_at = ? WHERE run_id = ?",
                       (json.dumps(tree), "done" if done else "running", time.time(), run_id))


class RunAttempts:
    """One run's attempts as the round driver's ``RunStore`` (``fedhh.rounds``)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id

    def attempts(self) -> list[AttemptRecord]:
        return [AttemptRecord(r.round, r.attempt, AttemptState(r.state), r.reason,
                              r.participants, r.summary, _charged_over(r.summary))
                for r in self.store.rounds(self.run_id)]

    def open_attempt(self, round_: int) -> int:
        return self.store.open_round(self.run_id, round_)

    def abort_attempt(self, round_: int, attempt: int, reason: str) -> None:
        self.store.abort_round(self.run_id, round_, attempt, reason)

    def charge_attempt(self, round_: int, attempt: int, state: AttemptState,
                       contributors: int | None, ledger: dict[str, Any], reason: str = "",
                       over: str | None = None) -> None:
        self.store.charge_round(self.run_id, round_, attempt, state.value, contributors, ledger,
                                reason, over)

    def release_attempt(self, round_: int, attempt: int, tree: dict[str, Any],
                        summary: dict[str, Any], done: bool) -> None:
        self.store.release_round(self.run_id, round_, attempt, tree, summary, done)


def _charged_over(summary: Mapping[str, Any]) -> str | None:
    """The ``over`` stored with an attempt's charge; None where none was (or what is there is
    no digest: a damaged summary vouches for no sum)."""
    over = summary.get(CHARGED_OVER)
    return over if isinstance(over, str) else None


def _run_row(row: tuple[Any, ...]) -> RunRow:
    record = f"run {row[0]!r}"
    return RunRow(row[0], decoded(record, "config", _object, row[1]),
                  decoded(record, "state", _run_state, row[2]),
                  decoded(record, "eps_local", _real, row[3]),
                  decoded(record, "tree", _object, row[4]),
                  decoded(record, "ledger", _object, row[5]),
                  decoded(record, "deny_codes", _codes, row[6]), row[7])


def decoded(record: str, field: str, decode: Callable[[Any], T], raw: Any) -> T:
    """``decode(raw)``, or StoreDamaged naming the record and the field: bytes changed in the
    file (SQLite pages carry no checksum) must not become an internal error, nor take every
    other run's listing with them. (ConfigError and PrivacyError are ValueErrors: raised by
    ``decode``, they describe stored bytes, not a caller's request.)"""
    try:
        return decode(raw)
    # (RecursionError: JSON nested thousands deep, which json reads by recursion)
    except (ValueError, TypeError, KeyError, RecursionError) as error:
        what = f"no {error}" if isinstance(error, KeyError) else str(error)
        raise StoreDamaged(f"the stored {record} is damaged: {field}: {what}") from None


def _object(raw: str) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"a JSON object was written, this is {type(value).__name__}")
    return value


def _refuse_nul(run_id: str) -> None:
    """No run has an id with a NUL, and PostgreSQL refuses one in a text parameter (an internal
    error before). Other ids that are not RUN_ID's are looked up: a run stored before
    ``fullmatch`` may have one."""
    if "\x00" in run_id:
        raise NotFoundError(f"unknown run {shown(run_id)} (a run's id is {RUN_ID_RULE})")


def _run_state(raw: Any) -> str:
    if raw not in RUN_STATES:
        raise ValueError(f"{raw!r:.40} is not a run state ({', '.join(RUN_STATES)})")
    return str(raw)


def _real(raw: Any) -> float:
    if isinstance(raw, str | bytes):  # a REAL column holds no text unless the file changed
        raise ValueError(f"a number was written, this is {raw!r:.40}")
    return float(raw)


def _codes(raw: str) -> list[int]:
    return [int(c) for c in json.loads(raw)]
