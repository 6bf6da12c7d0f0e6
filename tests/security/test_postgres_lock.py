"""The PostgreSQL store with a table locked by another session (an operator's `psql` left in a
transaction after a `LOCK TABLE`, an `ALTER TABLE`, a `VACUUM FULL`): a statement waits for
the lock at most ``LOCK_WAIT_MS``, and after a wait ran out, statements do not wait at all for a
pause (1 s, doubling while the lock stays held, to 30 s) unless the lock is free (outside
probe, thirty-sixth stop).

Before, PostgreSQL's default (no lock_timeout) let one statement wait for as long as the lock
was held, on the coordinator's event loop: with `enrollment_tokens` locked, a
MintEnrollmentTokens call stopped the whole coordinator, and its health checks ran into their
10 s deadline until the lock was released (16 s later). The store's clock is injected in the
first test: no test waits for a pause to pass. How long a statement may wait is read from the
store's session (its lock_timeout, which bounds the wait), not timed: a stalled machine cannot
make a refusal at once look slow. Only the waits that did happen are timed, from below; a
refusal arriving at all, the lock still held, is the proof that the wait ended."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from postgres_kit import PostgresServer

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.db.postgres import (
    LOCK_PAUSE_MAX_S,
    LOCK_PAUSE_S,
    LOCK_WAIT_MS,
    PostgresDatabase,
)

pytestmark = pytest.mark.slow
WAIT_S = LOCK_WAIT_MS / 1000


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with PostgresServer() as pg:
        yield pg


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def write(db: PostgresDatabase, label: str) -> float:
    start = time.monotonic()
    with db.transaction() as tx:
        tx.execute("INSERT INTO enrollment_tokens (token_hash, label) VALUES (?, ?)",
                   (label.encode(), label))
    return time.monotonic() - start


def refused(db: PostgresDatabase, label: str) -> tuple[float, str]:
    start = time.monotonic()
    with pytest.raises(StoreUnavailable) as error:
        write(db, label)
    return time.monotonic() - start, str(error.value)


def waits_ms(db: PostgresDatabase) -> int:
    """How long the store's last statement could wait for a lock, in ms (1 in a pause: 0
    would be no bound at all)."""
    assert db._conn is not None
    row = db._conn.execute("SELECT setting FROM pg_settings WHERE name = 'lock_timeout'"
                           ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_held_lock_costs_one_wait_per_pause(server: PostgresServer) -> None:
    url = server.create_database()
    db = PostgresDatabase(url)
    clock = Clock()
    db._clock = clock  # (the store's own seam for tests: its pauses read it)
    other = psycopg.connect(url)
    try:
        other.execute("LOCK TABLE enrollment_tokens IN EXCLUSIVE MODE")  # held: a transaction
        took, message = refused(db, "a")
        assert took >= WAIT_S * 0.9 and waits_ms(db) == LOCK_WAIT_MS, took
        assert "lock timeout" in message and "another session holds a lock" in message, message
        assert f"for {LOCK_PAUSE_S:g} s" in message, message
        for label in ("b", "c"):  # within the pause: at once
            refused(db, label)
            assert waits_ms(db) == 1
        assert db.query("SELECT COUNT(*) FROM runs") == [(0,)]  # another table: served
        pause = LOCK_PAUSE_S
        for _ in range(5):  # 2, 4, 8, 16, 30 s
            clock.now += pause
            took, message = refused(db, "d")
            assert took >= WAIT_S * 0.9 and waits_ms(db) == LOCK_WAIT_MS, took
            pause = min(2 * pause, LOCK_PAUSE_MAX_S)
            assert f"for {pause:g} s" in message, message
        assert pause == LOCK_PAUSE_MAX_S
        other.rollback()  # released: a write within the pause runs at once
        write(db, "e")
        assert waits_ms(db) == 1
        assert db.query("SELECT label FROM enrollment_tokens") == [("e",)]
        other.execute("LOCK TABLE enrollment_tokens IN EXCLUSIVE MODE")  # the pause is over
        took, message = refused(db, "f")
        assert took >= WAIT_S * 0.9 and f"for {LOCK_PAUSE_S:g} s" in message
        assert waits_ms(db) == LOCK_WAIT_MS
        other.rollback()
    finally:
        other.close()
        db.close()


def test_a_coordinator_on_a_locked_table_answers_its_health_checks(
        server: PostgresServer, tmp_path: Path) -> None:
    url = server.create_database()
    with LocalTopology(tmp_path / "topology", env={"FEDHH_CACHE": str(tmp_path / "cache")},
                       database=url) as topo:
        topo.start_aggregator()
        topo.start_coordinator()
        address, ca = topo.address("coordinator"), topo.workdir / "tls" / "ca.pem"
        other = psycopg.connect(url)
        answers: list[str] = []
        try:
            other.execute("LOCK TABLE enrollment_tokens IN EXCLUSIVE MODE")
            with AdminClient(address, topo.token("admin"), ca) as client:
                def mint() -> None:
                    for _ in range(3):
                        try:
                            client.mint_tokens(1, label="x")
                            answers.append("OK")
                        except grpc.RpcError as error:
                            answers.append(error.code().name)
                minting = threading.Thread(target=mint)
                minting.start()
                with grpc.secure_channel(address, ca_credentials(ca)) as channel:
                    health = health_pb2_grpc.HealthStub(channel)
                    # Each check answered within its deadline, far above one lock wait (the
                    # old coordinator held its loop for as long as the lock was held).
                    checks = 0
                    while minting.is_alive() or not checks:
                        reply = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                        assert reply.status == health_pb2.HealthCheckResponse.SERVING
                        checks += 1
                minting.join(60)
            assert answers == ["UNAVAILABLE"] * 3, answers
            other.rollback()
            with AdminClient(address, topo.token("admin"), ca) as client:
                assert client.enrollment().tokens_unused == 0  # nothing refused was written
        finally:
            other.close()
