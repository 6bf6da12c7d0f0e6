"""The coordinator on PostgreSQL (a real server started by the test): killed with SIGKILL
mid-run, a new coordinator process resumes from the database with an exact ledger, as the
SQLite store does (test_networked_failures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from networked_kit import (
    COORDINATOR_FLAGS,
    admin_client,
    planted_stack,
    run_config,
    wait_for_line,
)
from postgres_kit import PostgresServer

pytestmark = pytest.mark.slow


def test_a_coordinator_on_postgresql_killed_mid_run_resumes_with_an_exact_ledger(
    tmp_path: Path,
) -> None:
    with PostgresServer() as pg, planted_stack(tmp_path, pg.create_database()) as topo:
        with admin_client(topo) as client:
            # A check-in closes once 150 of the 200 are in (and a second passes with none
            # joining): after the restart, the devices come back over their reconnection
            # backoffs (up to 10 s each, jittered), and the retry's check-in waited for the
            # last of the 200 (~27 s of the test's 64 at a load of 11).
            client.start_run(run_config(rounds=2, max_bits=20, dim_limit=1 << 10,
                                        target_devices=150, min_devices=120,
                                        checkin_ms=120_000, stage_ms=10_000), run_id="crash")
            wait_for_line(topo.services["coordinator"].log,
                          '"message": "round released"')
        topo.kill("coordinator")  # round 2 is open now: checking in or aggregating
        topo.start_coordinator(COORDINATOR_FLAGS)
        with admin_client(topo) as client:
            run = client.wait("crash", 240)
            results = client.results("crash")
        # Nothing of the run lives outside the database: no SQLite file was written.
        assert not (topo.workdir / "coordinator.sqlite").exists()
    assert run.state == "done", run.error
    by_round: dict[int, list[tuple[str, str]]] = {}
    for r in run.rounds:
        by_round.setdefault(r.round, []).append((r.state, r.reason))
    assert [s for s, _ in by_round[1]] == ["released"]
    assert by_round[2][-1][0] == "released"
    first = by_round[2][0]
    assert first[0] == "released" or (first[0] == "aborted" and
                                      "coordinator stopped" in first[1]), by_round[2]
    assert [s["round_index"] for s in json.loads(results.ledger_json)["spends"]] == [0, 1]
    assert run.rounds_released == 2
