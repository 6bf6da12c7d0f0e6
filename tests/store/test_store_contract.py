"""The coordinator's store, one contract run against every backend: the embedded SQLite file
and a real PostgreSQL server (started by the test, on a port the OS chose). Every method is one
transaction: a refused change changes nothing; what was committed survives reopening; a
database that is not a whole store is refused and left as it is; the dashboard's reader sees
the same data through a connection that cannot write."""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from postgres_kit import PostgresServer

from fedhh.errors import (
    AuthenticationError,
    ConfigError,
    ConflictError,
    NotFoundError,
    StoreDamaged,
)
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.db.postgres import PostgresDatabase, StoreUnavailable
from fedhh_coordinator.store import CHARGED_OVER, RunAttempts, Store


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


class StoreContract:
    """The contract; each subclass provides a fresh database's location."""

    __test__ = False

    @pytest.fixture
    def location(self) -> str:  # pragma: no cover - every backend overrides it
        raise NotImplementedError

    @pytest.fixture
    def store(self, location: str) -> Iterator[Store]:
        store = Store(location)
        yield store
        store.close()

    # ---- devices and tokens -----------------------------------------------------------------
    def test_devices_enroll_once_per_identity_key(self, store: Store) -> None:
        key = bytes(range(32))  # zero bytes and all: stored as bytes, read back as bytes
        first = store.add_device(b"\x00" * 32, key, "phone ü")
        second = store.add_device(b"c" * 32, b"k" * 32, "")
        assert second > first >= 1
        assert store.device(first) == (b"\x00" * 32, key)
        with pytest.raises(ConflictError, match="already enrolled"):
            store.add_device(b"x" * 32, key, "again")
        assert store.device(second + 1) is None

    def test_one_time_tokens_are_consumed_with_the_enrollment(self, store: Store) -> None:
        assert store.add_enrollment_tokens([b"a" * 32, b"b" * 32], "batch") == 2
        assert store.add_enrollment_tokens([b"a" * 32, b"c" * 32]) == 1
        store.add_enrollment_tokens([b"old" * 10 + b"xx"], expires_at=time.time() - 1)
        device = store.add_device(b"c" * 32, b"1" * 32, "", token_hash=b"a" * 32)
        with pytest.raises(AuthenticationError, match="already used"):
            store.add_device(b"c" * 32, b"2" * 32, "", token_hash=b"a" * 32)
        with pytest.raises(AuthenticationError, match="unknown"):
            store.add_device(b"c" * 32, b"3" * 32, "", token_hash=b"z" * 32)
        with pytest.raises(AuthenticationError, match="expired"):
            store.add_device(b"c" * 32, b"4" * 32, "", token_hash=b"old" * 10 + b"xx")
        # The refused enrollments enrolled nobody and spent no token.
        assert store.device(device + 1) is None
        assert store.add_device(b"c" * 32, b"2" * 32, "", token_hash=b"b" * 32) == device + 1

    def test_a_mint_record_answers_what_its_id_drew_before(self, store: Store) -> None:
        asked = {"count": 2, "ttl_s": None, "label": "batch"}
        assert store.record_mint("m-1", asked, [b"a" * 32, b"b" * 32]) == []
        assert store.record_mint("m-1", asked, [b"c" * 32, b"d" * 32]) == [b"a" * 32, b"b" * 32]
        assert store.record_mint("m-2", asked, [b"e" * 32]) == []
        with pytest.raises(ConflictError, match="another label"):
            store.record_mint("m-1", {**asked, "label": "other"}, [b"f" * 32])
        assert store.record_mint("m-1", asked, []) == [b"a" * 32, b"b" * 32, b"c" * 32,
                                                       b"d" * 32]

    def test_new_tokens_are_told_from_known_ones(self, store: Store) -> None:
        store.add_enrollment_tokens([b"a" * 32])
        assert store.add_new_enrollment_tokens([b"b" * 32, b"a" * 32, b"b" * 32]) == [b"b" * 32]

    def test_lifetime_charges_are_once_per_run(self, store: Store) -> None:
        a = store.add_device(b"c" * 32, b"a" * 32, "")
        b = store.add_device(b"c" * 32, b"b" * 32, "")
        for run in ("r1", "r2"):
            store.create_run(run, {}, 1.0, {}, {}, [])
        store.charge_devices("r1", [a, b], 1.5, 1e-6)
        store.charge_devices("r1", [a], 9.0, 1e-3)  # a second charge of r1 is ignored
        store.charge_devices("r2", [a], 0.5, 1e-6)
        spends = store.device_spends(0.0)
        assert spends[a] == pytest.approx((2.0, 2e-6)) and spends[b] == pytest.approx((1.5, 1e-6))
        assert store.device_spends(0.0, exclude_run="r2")[a] == pytest.approx((1.5, 1e-6))
        assert store.device_spends(time.time() + 60) == {}
        # each device's charges as (eps, delta, runs), for budgets.py's exact sums
        terms = store.device_spend_terms(0.0)
        assert sorted(terms[a]) == [(0.5, 1e-6, 1), (1.5, 1e-6, 1)]
        assert terms[b] == [(1.5, 1e-6, 1)]
        assert store.device_spend_terms(0.0, exclude_run="r2") == {a: [(1.5, 1e-6, 1)],
                                                                   b: [(1.5, 1e-6, 1)]}
        # a run that ended over its target: its charges raised, never lowered
        assert store.raise_run_charge("r1", 2.5) == 2 and store.raise_run_charge("r1", 2.0) == 0
        assert store.device_spend_terms(0.0, exclude_run="r2") == {a: [(2.5, 1e-6, 1)],
                                                                   b: [(2.5, 1e-6, 1)]}
        # the charge is the ledger's double, stored as it is: one unit in the last place above
        # reads back above (the exact sums are of what is stored)
        above = math.nextafter(2.5, math.inf)
        assert store.raise_run_charge("r1", above) == 2
        assert store.device_spend_terms(0.0, exclude_run="r2")[a] == [(above, 1e-6, 1)]

    # ---- runs and attempts -------------------------------------------------------------------
    def test_a_damaged_run_row_is_named_and_spoils_only_itself(self, store: Store) -> None:
        """Bytes changed in the store (SQLite pages carry no checksum) read back as
        StoreDamaged naming the run and the field, not as a JSON error; the other runs and
        the list of runs still read."""
        store.create_run("old", {}, 1.0, {}, {}, [])
        store.create_run("new", {}, 1.0, {}, {}, [])
        store.open_round("old", 1)
        with store.db.transaction() as db:
            db.execute("UPDATE runs SET config = '{\"rounds\": 4,' WHERE run_id = 'old'")
        with pytest.raises(StoreDamaged, match=r"^the stored run 'old' is damaged: config: "):
            store.run("old")
        assert store.run("new").config == {}
        assert store.run_states() == [("old", "running"), ("new", "pending")]
        with store.db.transaction() as db:
            db.execute("UPDATE rounds SET summary = '[]' WHERE run_id = 'old'")
        with pytest.raises(StoreDamaged, match=r"^the stored round 1.1 of run 'old' is "
                                               r"damaged: summary: a JSON object was written"):
            store.rounds("old")

    def test_runs_are_created_once(self, store: Store) -> None:
        store.create_run("one", {"rounds": 2}, 3.5, {"t": [1]}, {"spends": []}, [2**63 + 5])
        with pytest.raises(ConflictError):
            store.create_run("one", {}, 1.0, {}, {}, [])
        store.create_run("two", {}, 1.0, {}, {}, [])
        row = store.run("one")
        assert (row.config, row.state, row.eps_local, row.tree, row.deny_codes) == (
            {"rounds": 2}, "pending", 3.5, {"t": [1]}, [2**63 + 5])
        assert store.run_states() == [("one", "pending"), ("two", "pending")]
        assert store.run_states(("failed",)) == []
        with pytest.raises(NotFoundError):
            store.run("three")
        store.set_run_state("two", "failed", "why")
        assert (store.run("two").state, store.run("two").error) == ("failed", "why")

    def test_an_attempt_is_charged_once_then_released(self, store: Store) -> None:
        store.create_run("r", {}, 1.0, {}, {}, [])
        assert store.open_round("r", 1) == 1
        assert store.run("r").state == "running"
        store.annotate_round("r", 1, 1, {"members": [3, 1, 2]})
        store.annotate_round("r", 1, 1, {"sharded": True})
        store.charge_round("r", 1, 1, "releasing", 180, {"spends": [1]})
        with pytest.raises(ConflictError):  # released or lost attempts are not charged again
            store.charge_round("r", 1, 2, "releasing", 10, {})
        store.release_round("r", 1, 1, {"state": 2}, {"kept": 4}, done=True)
        with pytest.raises(ConflictError, match="not releasing"):
            store.release_round("r", 1, 1, {}, {}, done=True)
        row, = store.rounds("r")
        assert (row.state, row.participants) == ("released", 180)
        assert row.summary == {"members": [3, 1, 2], "sharded": True, "kept": 4}
        run = store.run("r")
        assert (run.state, run.ledger, run.tree) == ("done", {"spends": [1]}, {"state": 2})

    def test_whose_reports_a_charge_was_over_is_kept_with_it(self, location: str) -> None:
        """The ``over`` given with a charge is committed with it, kept by the writes after it
        (a lost charge that names none, the summary annotated, the release) and across
        reopening, and read back as the attempt's; an attempt charged with none has none."""
        store = Store(location)
        store.create_run("r", {}, 1.0, {}, {}, [])
        store.open_round("r", 1)
        store.open_round("r", 1)
        store.annotate_round("r", 1, 1, {"sharded": True})
        store.charge_round("r", 1, 1, "releasing", 180, {"spends": [1]}, over="sha256:ab")
        store.annotate_round("r", 1, 1, {"kept": 4})
        store.charge_round("r", 1, 2, "releasing", 180, {"spends": [1, 2]})
        store.charge_round("r", 1, 2, "lost", None, {"spends": [1, 2]}, "gone")
        store.close()
        store = Store(location)
        try:
            assert [a.over for a in RunAttempts(store, "r").attempts()] == ["sha256:ab", None]
            store.release_round("r", 1, 1, {}, {"kept": 5}, done=True)
            assert store.rounds("r")[0].summary == {"sharded": True, CHARGED_OVER: "sha256:ab",
                                                    "kept": 5}
            assert RunAttempts(store, "r").attempts()[0].over == "sha256:ab"
        finally:
            store.close()

    def test_lost_and_aborted_attempts(self, store: Store) -> None:
        store.create_run("r", {}, 1.0, {}, {}, [])
        for _ in range(3):
            store.open_round("r", 1)
        store.abort_round("r", 1, 1, "too few")
        store.charge_round("r", 1, 2, "lost", None, {"spends": ["x"]}, "unmask began")
        store.abort_round("r", 1, 2, "ignored: it is no longer open")
        with pytest.raises(ValueError, match="releasing or lost"):
            store.charge_round("r", 1, 3, "released", 1, {})
        with pytest.raises(NotFoundError):
            store.annotate_round("r", 1, 9, {})
        states = [(r.attempt, r.state, r.reason) for r in store.rounds("r")]
        assert states == [(1, "aborted", "too few"), (2, "lost", "unmask began"),
                          (3, "open", "")]
        assert store.open_round("r", 1) == 4 and store.open_round("r", 2) == 1

    def test_a_failed_transaction_leaves_nothing(self, store: Store) -> None:
        store.create_run("r", {}, 1.0, {}, {}, [])
        with pytest.raises(RuntimeError), store._tx() as db:
            db.execute("UPDATE runs SET state = ? WHERE run_id = ?", ("failed", "r"))
            raise RuntimeError("crash in the middle")
        assert store.run("r").state == "pending"

    def test_committed_state_survives_reopening(self, location: str) -> None:
        store = Store(location)
        store.create_run("r", {}, 1.0, {}, {}, [])
        store.open_round("r", 1)
        store.charge_round("r", 1, 1, "releasing", 7, {"spends": [7]})
        store.close()
        again = Store(location)
        try:
            assert again.rounds("r")[0].state == "releasing"
            assert again.run("r").ledger == {"spends": [7]}
        finally:
            again.close()

    # ---- what is a store ---------------------------------------------------------------------
    def execute(self, location: str, sql: str) -> list[tuple[Any, ...]]:  # pragma: no cover
        """Run ``sql`` on the database itself, not through a store."""
        raise NotImplementedError

    def test_another_programs_database_is_refused_and_left_as_it_is(self, location: str
                                                                     ) -> None:
        """Before: our tables were added to it (and a SQLite file switched to WAL)."""
        self.execute(location, "CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        with pytest.raises(ConfigError, match=r"is not a fedhh store \(it holds the tables "
                                              r"moz_places\); give the coordinator a database "
                                              r"of its own\. It is left as it is$"):
            Store(location)
        assert self.tables(location) == ["moz_places"]

    def test_a_store_that_lost_a_table_is_refused(self, location: str) -> None:
        """Before: the table was made again, empty: every attempt it held was gone unsaid."""
        Store(location).close()
        self.execute(location, "DROP TABLE rounds")
        with pytest.raises(ConfigError, match=r"is not a whole store: its table rounds is "
                                              r"missing \(a damaged store: restore it from a "
                                              r"backup; "):
            Store(location)
        self.execute(location, "ALTER TABLE runs RENAME TO runs_old")
        with pytest.raises(ConfigError, match=r"its tables runs, rounds are missing"):
            Store(location)
        assert "rounds" not in self.tables(location)

    def test_a_selector_does_not_make_a_store(self, location: str) -> None:
        self.execute(location, "CREATE TABLE scratch (x INTEGER)")
        self.execute(location, "DROP TABLE scratch")  # a database, and no table in it
        with pytest.raises(ConfigError, match=r"no coordinator store there"):
            Store(location, selector=True)
        assert self.tables(location) == []

    def tables(self, location: str) -> list[str]:
        raise NotImplementedError  # pragma: no cover

    # ---- the dashboard's reader ------------------------------------------------------------
    def test_the_reader_sees_the_store_and_cannot_write(self, store: Store, location: str
                                                         ) -> None:
        store.add_enrollment_tokens([b"a" * 32, b"b" * 32])
        store.add_enrollment_tokens([b"e" * 32], expires_at=time.time() - 5)
        a = store.add_device(b"c" * 32, b"a" * 32, "alpha", token_hash=b"a" * 32)
        b = store.add_device(b"c" * 32, b"b" * 32, "")
        store.create_run("r", {}, 1.0, {}, {}, [])
        store.charge_devices("r", [a, b], 2.0, 1e-6)
        store.charge_devices("r", [a], 1.0, 1e-6)
        reader = Reader(location)
        try:
            fleet = reader.fleet()
            assert (fleet.devices, fleet.tokens, fleet.tokens_used, fleet.tokens_expired) == (
                2, 3, 1, 1)
            assert [e.device_id for e in reader.recent_enrollments(5)] == [b, a]
            charges = reader.device_charges(0.0)
            assert [(c.device_id, c.label, c.runs) for c in charges] == [(a, "alpha", 1),
                                                                        (b, "", 1)]
            assert set(reader.run_times()) == {"r"}
            with pytest.raises(Exception):  # noqa: B017 - sqlite3 and psycopg errors alike
                reader._all("DELETE FROM devices")
        finally:
            reader.close()
        assert store.device(a) is not None


class TestSqliteStore(StoreContract):
    __test__ = True

    @pytest.fixture
    def location(self, tmp_path: Path) -> str:
        return str(tmp_path / "coordinator.sqlite")

    def execute(self, location: str, sql: str) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(location)) as db, db:
            return db.execute(sql).fetchall()

    def tables(self, location: str) -> list[str]:
        return sorted(r[0] for r in self.execute(
            location, "SELECT name FROM sqlite_master WHERE type = 'table'"))

    def test_an_empty_file_is_refused_and_left_as_it_is(self, location: str) -> None:
        """A store truncated to nothing: SQLite reads an empty file as a new database, and
        the coordinator started again with no devices and no privacy spent."""
        Path(location).touch()
        with pytest.raises(ConfigError, match=r"is an empty file, not a store"):
            Store(location)
        assert Path(location).stat().st_size == 0

    def test_a_foreign_file_keeps_its_journal_mode(self, location: str) -> None:
        self.execute(location, "CREATE TABLE moz_places (id INTEGER PRIMARY KEY)")
        before = Path(location).read_bytes()
        with pytest.raises(ConfigError):
            Store(location)
        assert Path(location).read_bytes() == before


class TestPostgresStore(StoreContract):
    __test__ = True

    @pytest.fixture
    def location(self, pg_server: PostgresServer) -> str:
        return pg_server.create_database()

    def execute(self, location: str, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(location, autocommit=True) as db:
            cursor = db.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def tables(self, location: str) -> list[str]:
        return sorted(r[0] for r in self.execute(
            location, "SELECT table_name FROM information_schema.tables "
                      "WHERE table_schema = current_schema()"))

    def test_one_coordinator_per_database(self, store: Store, location: str) -> None:
        with pytest.raises(ConfigError, match="another coordinator holds"):
            PostgresDatabase(location, lock_timeout_s=0.5)
        store.close()  # its session ends: the lock with it
        second = PostgresDatabase(location, lock_timeout_s=10)
        second.close()

    def test_the_url_password_never_reaches_a_message(self, pg_server: PostgresServer) -> None:
        url = f"postgresql://fedhh:s3cret@127.0.0.1:{pg_server.port}/missing_db"
        with pytest.raises(ConfigError) as refused:
            Store(url)
        assert "s3cret" not in str(refused.value) and "***" in str(refused.value)

    def test_a_lost_connection_fails_one_call_and_the_next_reconnects(
        self, store: Store, pg_server: PostgresServer
    ) -> None:
        import psycopg

        store.create_run("r", {}, 1.0, {}, {}, [])
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE application_name = 'fedhh-coordinator'")
        with pytest.raises(StoreUnavailable, match="the database failed"):
            store.run("r")
        assert store.run("r").state == "pending"

    def test_a_connection_left_mid_command_is_replaced_at_the_next_call(
        self, store: Store
    ) -> None:
        # (the state a backend terminated while a query was sent can leave: before, every
        # later call failed with "another command is already in progress")
        store.create_run("r", {}, 1.0, {}, {}, [])
        store.db._conn.pgconn.send_query(b"SELECT 1")  # sent, its result never read
        with pytest.raises(StoreUnavailable, match="the database failed"):
            store.run("r")
        assert store.run("r").state == "pending"

    def test_a_server_that_takes_no_writes_is_unavailable_and_keeps_the_session(
        self, store: Store
    ) -> None:
        # (a hot standby not yet promoted, or default_transaction_read_only reloaded into open
        # sessions: SQLSTATE 25006, which psycopg raises as InternalError; before, a bug's
        # error, so the run under way failed for good and calls were told INTERNAL)
        store.create_run("r", {}, 1.0, {}, {}, [])
        session = store.db.query("SELECT pg_backend_pid()")
        store.db._conn.execute("SET default_transaction_read_only = on")
        with pytest.raises(StoreUnavailable, match=r"read-only transaction .*takes no writes"):
            store.set_run_state("r", "running")
        assert store.run("r").state == "pending"
        assert store.db.query("SELECT pg_backend_pid()") == session  # the lock's session
        store.db._conn.execute("SET default_transaction_read_only = off")
        store.set_run_state("r", "running")
        assert store.run("r").state == "running"
