"""Failures of the networked system, with real processes: devices dropping out at every stage,
the coordinator killed with SIGKILL mid-run, the aggregator killed mid-round or stopped before a
run (waited for), runs damaged in the store. Runs complete, nothing is released from a broken
round, and the privacy ledger counts each released round exactly once.

The tests without dropouts on the short population share one topology (``plain``), each a run
of its own that reads only what the logs gained during it; a test that stops a service starts
it again (before, each started its own processes and enrolled its 200 devices)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from networked_kit import (
    COORDINATOR_FLAGS,
    SHORT,
    LogMarks,
    planted_dataset,
    run_config,
    short_dataset,
    stop_cleanly,
    wait_for_line,
)

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.topology import LocalTopology

pytestmark = pytest.mark.slow


def start(root: Path, drop: list[str] | None = None, *, planted: bool = False,
          aggregator: list[str] | None = None) -> tuple[LocalTopology, Path]:
    data = (planted_dataset if planted else short_dataset)(root / "users.txt")
    topo = LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")})
    topo.start_aggregator(aggregator)
    topo.start_coordinator(COORDINATOR_FLAGS)
    for i, users in enumerate(("0:100", "100:200")):
        topo.start_devices(f"devices-{i}", str(data), users, drop)
    topo.wait_for_devices()
    return topo, data


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTopology]:
    topo, _ = start(tmp_path_factory.mktemp("plain"))
    with topo:
        yield topo


def admin(topo: LocalTopology) -> AdminClient:
    return AdminClient(topo.address("coordinator"), topo.token("admin"),
                       topo.workdir / "tls" / "ca.pem")


def ledger_rounds(results) -> list[int]:  # type: ignore[no-untyped-def]
    return [s["round_index"] for s in json.loads(results.ledger_json)["spends"]]


def test_dropouts_at_every_stage(tmp_path: Path) -> None:
    # A stage that lost a device closes once n_min devices answered and then none for 2 s,
    # whatever is missing (--quiet-close-tail 0): without it, every such stage waited for its
    # deadline (25 s a run). A device later than that counts as dropped, which the bounds
    # below allow.
    topo, _ = start(tmp_path, ["--drop-rate", "0.15", "--drop-stage", "random", "--seed", "3"],
                    aggregator=["--quiet-close-ms", "2000", "--quiet-close-tail", "0"])
    with topo, admin(topo) as client:
        # Should silence not close a stage, the deadlines add up from the round's opening:
        # 5 s to advertise (half a second's work), 10 s for key sharing (the heaviest, 3 s at
        # load 9) and 5 s for masked inputs (under a second) end the masked inputs 20 s in.
        client.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10, min_devices=120,
                                    stage_ms=10_000, advertise_ms=5_000,
                                    masked_input_ms=5_000, checkin_ms=120_000), run_id="drops")
        run = client.wait("drops", 240)
        results = client.results("drops")
        for i in range(2):  # (each writes its stats file as it stops)
            stop_cleanly(topo, f"devices-{i}")
    assert run.state == "done", run.error
    released = [r for r in run.rounds if r.state == "released"]
    assert len(released) == 1 and 120 <= released[0].participants < 200
    assert set(SHORT) <= {h.item for h in results.heavy_hitters}
    stats = [json.loads((topo.workdir / f"devices-{i}.stats.json").read_text())
             for i in range(2)]
    assert sum(s["dropped"] for s in stats) > 0
    assert ledger_rounds(results) == [0]


def test_coordinator_killed_mid_run_resumes_with_an_exact_ledger(tmp_path: Path) -> None:
    # Five-letter planted words: round 1 (10 bits) cannot finish them, so there is a round 2
    # (with one-letter items the run may legitimately end after round 1).
    topo, _ = start(tmp_path, planted=True)
    with topo:
        with admin(topo) as client:
            # Check-ins close once 150 of the 200 are in: after the restart the devices come
            # back over their jittered reconnection backoffs (up to 10 s each), and the
            # retry's check-in waited for the last of the 200 (~20 s).
            client.start_run(run_config(rounds=2, max_bits=20, dim_limit=1 << 10,
                                        target_devices=150, min_devices=120,
                                        checkin_ms=120_000, stage_ms=10_000), run_id="crash")
            wait_for_line(topo.services["coordinator"].log, '"message": "round released"')
        topo.kill("coordinator")  # round 2 is now open: checking in or aggregating
        topo.start_coordinator(COORDINATOR_FLAGS)
        with admin(topo) as client:
            run = client.wait("crash", 240)
            results = client.results("crash")
    assert run.state == "done", run.error
    by_round = {}
    for r in run.rounds:
        by_round.setdefault(r.round, []).append((r.attempt, r.state, r.reason))
    assert [s for _, s, _ in by_round[1]] == ["released"]
    assert by_round[2][-1][1] == "released"
    # The attempt the restart found open was settled: collected after all if the aggregator
    # still ran it, or aborted at no cost if it had not reached the aggregator.
    first = by_round[2][0]
    assert first[1] == "released" or (first[1] == "aborted" and
                                      "coordinator stopped" in first[2]), by_round[2]
    assert ledger_rounds(results) == [0, 1]
    assert run.rounds_released == 2


def test_aggregator_killed_mid_round_releases_nothing_and_the_retry_succeeds(
    plain: LocalTopology,
) -> None:
    topo, logs = plain, LogMarks(plain)
    with admin(topo) as client:
        client.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10,
                                    min_devices=150, checkin_ms=120_000, stage_ms=10_000),
                         run_id="lost")
        logs.wait_for("aggregator", '"message": "round opened"')
        topo.kill("aggregator")
        topo.start_aggregator()
        run = client.wait("lost", 240)
        results = client.results("lost")
    assert run.state == "done", run.error
    attempts = [(r.attempt, r.state, r.reason) for r in run.rounds]
    assert attempts[0][1] == "aborted" and attempts[-1][1] == "released"
    assert ledger_rounds(results) == [0]
    assert set(SHORT) <= {h.item for h in results.heavy_hitters}


def test_a_run_waits_for_a_stopped_aggregator_and_completes_once_it_is_back(
    plain: LocalTopology,
) -> None:
    """The aggregator is stopped before the run starts (a restart, an operator's stop): the
    run's first attempt waits for it, its progress naming the address, and runs once the
    aggregator is back on the same port; one attempt, one charge. Before, each attempt was
    aborted a second after the last ("did not answer") and the run failed within seconds."""
    topo, logs = plain, LogMarks(plain)
    with admin(topo) as client:
        address = topo.address("aggregator")
        assert topo.stop("aggregator") == 0
        client.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10,
                                    min_devices=150, checkin_ms=120_000, stage_ms=10_000),
                         run_id="outage")
        logs.wait_for("coordinator", '"message": "waiting for the aggregator"')
        # (the progress is set with that line, before the coordinator polls again)
        waiting = client.run("outage")
        assert waiting.state == "running", waiting.error
        assert waiting.progress.phase == f"waiting for the aggregator at {address}"
        assert [(r.attempt, r.state) for r in waiting.rounds] == [(1, "open")]
        topo.start_aggregator()
        assert topo.address("aggregator") == address
        run = client.wait("outage", 240)
        results = client.results("outage")
    assert run.state == "done", run.error
    assert [(r.attempt, r.state) for r in run.rounds] == [(1, "released")]
    assert ledger_rounds(results) == [0]
    assert set(SHORT) <= {h.item for h in results.heavy_hitters}


def test_a_run_damaged_in_the_store_fails_alone(plain: LocalTopology) -> None:
    """Bytes changed in the store's rows (SQLite pages carry no checksum). Before: the runner
    read every run's row to pick the next one, one row did not decode, and its task ended
    unseen: every later run stayed pending for ever, and ListRuns answered INTERNAL. A run's
    fixed part (config, deny list) is read once and kept (runs.FixedRuns, 6ce83808): damage
    made to it while the coordinator runs is seen where it is read again (ListRuns reads the
    config alone; a restarted coordinator), while GetRun and GetResults answer from the copy
    read whole before. (It damages the shared store: the last of the tests that share it.)"""
    topo = plain
    config = run_config(rounds=1, max_bits=10, dim_limit=1 << 10, min_devices=150,
                        checkin_ms=120_000, stage_ms=10_000)
    with admin(topo) as client:
        client.start_run(config, run_id="old")
        assert client.wait("old", 240).state == "done"
        kept = client.run("old")
        with sqlite3.connect(topo.database, timeout=60) as db:  # beside the running service
            db.execute("INSERT INTO runs SELECT 'stale', config, 'pending', eps_local, '{}', "
                       "ledger, deny_codes, '', 0, 0 FROM runs WHERE run_id = 'old'")
            db.execute("UPDATE runs SET config = '{#codec\": \"5bit\"}' WHERE run_id = 'old'")
        client.start_run(config, run_id="new")
        new = client.wait("new", 240)
        stale = client.run("stale")
        listed = {r.run_id: r for r in client.runs()}
        assert client.run("old") == kept  # (the copy read whole before the damage)
    topo.kill("coordinator")  # (a restart reads every run's row afresh)
    topo.start_coordinator(COORDINATOR_FLAGS)
    with admin(topo) as client:
        with pytest.raises(grpc.RpcError) as old:
            client.run("old")
        with pytest.raises(grpc.RpcError) as old_results:
            client.results("old")
    assert new.state == "done", new.error
    # The damaged pending run went first, and failed alone, naming what did not read back.
    assert stale.state == "failed"
    assert "the stored run 'stale' is damaged: tree: no 'next_round'" in stale.error
    assert listed["new"].state == "done"
    assert listed["old"].state == "done"
    assert listed["old"].error.startswith("the stored run 'old' is damaged: config: ")
    for refused in (old.value, old_results.value):
        assert refused.code() == grpc.StatusCode.DATA_LOSS
        assert refused.details().startswith("the stored run 'old' is damaged: config: ")
