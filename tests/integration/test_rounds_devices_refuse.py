"""A run whose rounds every device refuses, end to end: the run's abort reason says how many
devices each stage accepted and where the refusals are told, and the refusing devices spend
none of their privacy budget.

The devices' floor on the release threshold (--min-cohort 30) is above the run's n_min (15),
so each refuses the round, its one call to the aggregator its Decline. Before: the run failed
with "the aggregator aborted the round: too_few_devices" and nothing more, and each device had
recorded the round's eps_local as spent. (A run at a low expected_dropout, 0.01, was refused as
well, its (k, t) failing the lying-server bound the devices check at their own 30% dropout; the
coordinator now chooses (k, t) that meet it: tests/unit/secagg/test_secagg_params.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from networked_kit import COORDINATOR_FLAGS, run_config, short_dataset, stop_cleanly

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.topology import LocalTopology

pytestmark = pytest.mark.slow


def test_a_round_every_device_refuses_says_so_and_costs_them_nothing(tmp_path: Path) -> None:
    data = short_dataset(tmp_path / "users.txt")
    with LocalTopology(tmp_path / "topology", env={"FEDHH_CACHE": str(tmp_path / "cache")}) \
            as topo:
        topo.start_aggregator()
        topo.start_coordinator(COORDINATOR_FLAGS)
        topo.start_devices("devices", str(data), "0:25", ["--min-cohort", "30"])
        topo.wait_for_devices()
        with AdminClient(topo.address("coordinator"), topo.token("admin"),
                         topo.workdir / "tls" / "ca.pem") as admin:
            admin.start_run(run_config(
                rounds=1, max_bits=10, dim_limit=1 << 10, target_devices=25, min_devices=15,
                # (no device advertises; all decline, so the round aborts without waiting for
                # the advertisement's deadline, a minute away: at 1 s, a busy machine's
                # devices could decline after it, and fewer than 25 be counted)
                checkin_ms=60_000, stage_ms=3_000, advertise_ms=60_000, max_attempts=1,
                expected_dropout=0.05, corrupt_fraction=0.05), run_id="refused")
            run = admin.wait("refused", 180)
        stop_cleanly(topo, "devices")  # (the count of refused rounds is logged as it stops)
        log = (topo.workdir / "devices.log").read_text()
        budgets = sorted((topo.workdir / "devices" / "budgets").glob("*.json"))
        spends = [s for path in budgets for s in json.loads(path.read_text())["spends"]]
    assert run.state == "failed"
    reason = run.rounds[0].reason
    assert "too_few_devices" in reason
    # Beside the stages' counts, the members that gave up their seats (their Declines, as the
    # aggregator counted them): before, only its metric said so.
    assert "advertise_keys 0; 25 declined; 25 devices in the cohort, n_min 15" in reason, reason
    assert "key-advertisement window" not in reason  # (every missing member declined)
    assert '"refused the round"' in reason
    # Said once, then counted: the process's 25 devices refused alike (was a line each).
    assert log.count('"refused the round"') == 1, log
    assert "refused the round: 25 devices of this process in round 1" in log, log
    assert log.count("n_min=15 < floor 30") == 2  # (the first line and the count's details)
    assert spends == []
