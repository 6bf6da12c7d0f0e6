"""A cohort's members in its attempt's round summary: packed (one base64 string of 64-bit ids),
read back exactly, and summaries written before (a JSON list) still read; a restart rebuilds
the cohort, identity keys included, from either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.secagg import RoundConfig
from fedhh.secagg.config import StageDeadlines
from fedhh_coordinator.plans import SignedCohort
from fedhh_coordinator.store import Store, stored_members, stored_members_field


@pytest.mark.parametrize("members", [(), (1,), (7, 3, 0, 2**63 - 1, 2**40 + 5)])
def test_members_round_trip_through_the_summary_json(members: tuple[int, ...]) -> None:
    field = stored_members_field(members)
    assert stored_members(json.loads(json.dumps(field))) == members


def test_a_summary_written_before_reads_and_one_without_members_reads_none() -> None:
    assert stored_members({"members": [4, 2, 9]}) == (4, 2, 9)
    assert stored_members({"kept": 3}) is None
    with pytest.raises(ValueError):
        stored_members({"members_i64": "not base64!"})


@pytest.mark.parametrize("legacy", [False, True])
def test_a_restart_rebuilds_the_cohort_with_its_identity_keys(tmp_path: Path,
                                                              legacy: bool) -> None:
    store = Store(str(tmp_path / "coordinator.sqlite"))
    ids = [store.add_device(bytes([i]) * 32, bytes([i + 100]) * 32, f"d{i}") for i in range(5)]
    members = (ids[3], ids[0], ids[4])
    config = RoundConfig(round_id=b"r/1/1", num_devices=3, dimension=8, modulus_bits=16,
                         n_min=2, k=2, t=2, graph_seed=bytes(32),
                         deadlines=StageDeadlines(1, 2, 3, 4, 5), device_auth=True,
                         identity_root=bytes(32))
    cohort = SignedCohort(config, members, {1: bytes([103]) * 32, 2: bytes([100]) * 32,
                                            3: bytes([104]) * 32})
    stored = json.loads(json.dumps(cohort.stored()))
    assert "members" not in stored
    if legacy:
        stored = {"round_config": stored["round_config"], "members": list(members)}
    assert SignedCohort.from_stored(stored, store) == cohort
