"""PostgreSQL stopped and started again under a running coordinator (a managed database's
failover or upgrade): the run goes on from what the store holds, as after a coordinator
restart.

Before: the first store call after the restart failed with StoreUnavailable, a FedhhError, and
the runner marked the run "failed" with "the database failed: ..." for good, or (the database
still down) its ConfigError "cannot connect" stopped the runner and the coordinator exited 1;
a device or admin call meanwhile was told INVALID_ARGUMENT, as if its request were wrong."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from networked_kit import admin_client, planted_stack, run_config, wait_for_line
from postgres_kit import PostgresServer, holding_port

pytestmark = pytest.mark.slow


def pg_ctl(pg: PostgresServer, action: str) -> None:
    """Stop or start the server (stopping ends every session: the coordinator's connection,
    its advisory lock with it); started again on the same port, data and options."""
    options = (f"-p {pg.port} -c listen_addresses=127.0.0.1 "
               f"-c unix_socket_directories={pg.root} -c fsync=on")  # as postgres_kit's
    done = pg._run(str(pg.bin / "pg_ctl"), "-D", str(pg.data), "-l", str(pg.log), "-o", options,
                   "-m", "fast", "-w", "-t", "60", action)
    assert done.returncode == 0, done.stderr


def test_a_database_restart_mid_run_does_not_fail_the_run(tmp_path: Path) -> None:
    with PostgresServer() as pg, planted_stack(tmp_path, pg.create_database()) as topo:
        with admin_client(topo) as client:
            client.start_run(run_config(rounds=3, max_bits=30, dim_limit=1 << 10,
                                        min_devices=150, checkin_ms=120_000,
                                        stage_ms=10_000), run_id="blip")
            wait_for_line(topo.services["coordinator"].log,
                          '"message": "round released"')
            pg_ctl(pg, "stop")
            # (its port held meanwhile: the OS could hand it to another test's service, and
            # the server could not start on it again)
            with holding_port(pg.port):
                # the runner meets the outage at its next store call in round 2 and waits
                log = topo.services["coordinator"].log
                wait_for_line(log, "the store is unavailable; the runs wait for it")
                # a call meanwhile is UNAVAILABLE (worth a retry), not a refusal of its request
                with pytest.raises(grpc.RpcError) as error:
                    client.run("blip")
                assert error.value.code() == grpc.StatusCode.UNAVAILABLE, error.value
                assert "the database" in error.value.details()  # type: ignore[attr-defined]
                pg_ctl(pg, "start")
            wait_for_line(log, "the store answers again; the runs resume from it")
            run = client.wait("blip", 300)
            results = client.results("blip")
        assert topo.services["coordinator"].process.poll() is None  # still serving
        # no device took the outage for its credential refused (they were told
        # UNAUTHENTICATED, and stayed out of every later round)
        for name in ("devices-0", "devices-1"):
            assert "device credential rejected" not in topo.services[name].log.read_text()
    assert run.state == "done", run.error
    assert {r.participants for r in run.rounds if r.state == "released"} == {200}
    released = sorted({r.round for r in run.rounds if r.state == "released"})
    assert released == [1, 2, 3], [(r.round, r.attempt, r.state, r.reason) for r in run.rounds]
    # (an attempt the outage left open is settled as left by it: the coordinator never stopped)
    assert not any("coordinator stopped" in r.reason for r in run.rounds), run.rounds
    spends = json.loads(results.ledger_json)["spends"]
    assert sorted({s["round_index"] for s in spends}) == [0, 1, 2]


def test_a_database_that_takes_no_writes_for_a_while_does_not_fail_the_run(
        tmp_path: Path) -> None:
    """A failover's standby not yet promoted, or default_transaction_read_only reloaded into
    the open sessions: writes fail with SQLSTATE 25006, reads go on. Before, psycopg's
    InternalError was taken for a bug: the run failed for good ("internal error: cannot
    execute ... in a read-only transaction")."""
    import psycopg

    def read_only(pg: PostgresServer, on: bool) -> None:
        setting = "SET default_transaction_read_only = on" if on else \
            "RESET default_transaction_read_only"
        with psycopg.connect(pg.url(), autocommit=True) as admin:
            admin.execute(f"ALTER SYSTEM {setting}")
            admin.execute("SELECT pg_reload_conf()")

    with PostgresServer() as pg, planted_stack(tmp_path, pg.create_database()) as topo:
        log = topo.services["coordinator"].log
        with admin_client(topo) as client:
            client.start_run(run_config(rounds=3, max_bits=30, dim_limit=1 << 10,
                                        min_devices=150, checkin_ms=120_000,
                                        stage_ms=10_000), run_id="standby")
            wait_for_line(log, '"message": "round released"')
            read_only(pg, True)
            wait_for_line(log, "the store is unavailable; the runs wait for it")
            assert client.run("standby").state == "running"  # reads are answered
            read_only(pg, False)
            run = client.wait("standby", 300)
            results = client.results("standby")
        assert topo.services["coordinator"].process.poll() is None
    assert run.state == "done", run.error
    assert "takes no writes" in log.read_text()
    released = sorted({r.round for r in run.rounds if r.state == "released"})
    assert released == [1, 2, 3], [(r.round, r.attempt, r.state, r.reason) for r in run.rounds]
    spends = json.loads(results.ledger_json)["spends"]
    assert sorted(s["round_index"] for s in spends) == [0, 1, 2]  # each round charged once


def test_reconnections_to_a_database_that_stays_away_are_spaced(tmp_path: Path) -> None:
    """A reconnection blocks its caller (the coordinator's event loop) up to the connect
    timeout when the database's host does not answer: while it stays away, calls fail at once
    between tries spaced 1 s, doubling to 30 s, and the first call after the pause finds it
    back."""
    from fedhh_coordinator.db.postgres import (
        RECONNECT_PAUSE_MAX_S,
        PostgresDatabase,
        StoreUnavailable,
    )

    with PostgresServer() as pg:
        db = PostgresDatabase(pg.create_database())
        now = [1000.0]
        db._clock = lambda: now[0]
        tries: list[float] = []
        connect = db._connect

        def counted() -> object:
            tries.append(now[0])
            return connect()

        db._connect = counted  # type: ignore[method-assign]
        try:
            assert db.query("SELECT 1") == [(1,)]
            pg_ctl(pg, "stop")
            with holding_port(pg.port):  # (as in the test above)
                with pytest.raises(StoreUnavailable, match="the database failed"):
                    db.query("SELECT 1")  # the connection breaks under the call
                pauses = []
                for _ in range(8):
                    before = len(tries)
                    with pytest.raises(StoreUnavailable, match="the database is unavailable"):
                        db.query("SELECT 1")
                    assert len(tries) == before + 1
                    pause = db._reconnect.until - now[0]
                    pauses.append(pause)
                    now[0] += pause - 0.01  # within the pause: failed at once, not tried
                    with pytest.raises(StoreUnavailable, match="the database is unavailable"):
                        db.query("SELECT 1")
                    assert len(tries) == before + 1
                    now[0] += 0.02
                assert pauses == pytest.approx([1.0, 2.0, 4.0, 8.0, 16.0]
                                               + [RECONNECT_PAUSE_MAX_S] * 3)
                pg_ctl(pg, "start")
            now[0] += RECONNECT_PAUSE_MAX_S
            assert db.query("SELECT 1") == [(1,)]
            # back: the next outage starts again from 1 s
            assert (db._down, db._reconnect.failures) == ("", 0)
        finally:
            db.close()
