"""Completion rounds over the network (issue 27), real processes on 127.0.0.1: a URL, an
e-mail address and an emoji whose codes are longer than max_bits are found whole by the
coordinator's completion rounds, each charged at its own local epsilon, and the networked run
equals the per-device simulation of the same seed."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from networked_kit import COORDINATOR_FLAGS, SEED, USERS, run_config

from fedhh.config import Mode
from fedhh.data.registry import resolve_dataset
from fedhh.privacy import PrivacyLedger
from fedhh.privacy.accountant import allocation_offsets
from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.run_config import from_proto
from fedhh.rpc.topology import LocalTopology
from fedhh.simulation.runner import simulate

pytestmark = pytest.mark.slow

LONG = {"https://abc.org/": 70, "bob@gmail.com": 60, "👍": 50}


def long_items_dataset(path: Path) -> Path:
    """200 users: the long items above plus a random short word each."""
    rng = random.Random(3)
    holders = [item for item, count in LONG.items() for _ in range(count)]
    holders += [""] * (USERS - len(holders))
    rng.shuffle(holders)
    lines = []
    for held in holders:
        word = "".join(rng.choice("abcdefghij") for _ in range(4))
        lines.append(f"{held} {word}".strip())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTopology, Path]]:
    root = tmp_path_factory.mktemp("completion")
    data = long_items_dataset(root / "users.txt")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as topo:
        topo.start_aggregator()
        topo.start_coordinator(COORDINATOR_FLAGS)
        topo.start_devices("devices-0", str(data), f"0:{USERS}", ["--seed", str(SEED)])
        topo.wait_for_devices()
        yield topo, data


def test_completion_rounds_find_long_items_whole_over_the_network(
        system: tuple[LocalTopology, Path]) -> None:
    topo, data = system
    config = run_config(codec="unicode", max_bits=24, rounds=3, dim_limit=1 << 14,
                        completion_rounds=8, completion_weight=0.5)
    with AdminClient(topo.address("coordinator"), topo.token("admin"),
                     topo.workdir / "tls" / "ca.pem") as client:
        client.start_run(config, run_id="long")
        run = client.wait("long", 600)
        results = client.results("long")
    assert run.state == "done", run.error
    found = {h.item for h in results.heavy_hitters if h.ended}
    assert set(LONG) <= found
    released = [r for r in run.rounds if r.state == "released"]
    assert len(released) > 3  # completion rounds ran
    # Each completion round ran and was charged at eps_local + ln(0.5).
    ledger = PrivacyLedger.from_dict(json.loads(results.ledger_json))
    assert ledger.round_epsilon(3) == pytest.approx(ledger.eps_local - 0.6931, abs=1e-3)
    assert {s.round_index for s in ledger.spends} == {r.round - 1 for r in released}

    # The per-device simulation of the same configuration and seed draws the same sums and
    # charges the same ledger.
    stored = from_proto(run.config)
    assert stored.completion() == 8 and stored.code_bits(Mode.NETWORK) == 14 * 11
    weights = stored.round_weights()
    assert weights is not None
    replay = PrivacyLedger.open_allocated(stored.eps_agg, stored.delta,
                                          allocation_offsets(weights), stored.min_devices,
                                          eps_local=stored.eps_local)
    sim = simulate(resolve_dataset(str(data), cache_dir=topo.workdir.parent / "cache"),
                   replace(stored, seed=SEED, per_device=True), ledger=replay)
    assert [(h.item, h.estimate, h.round) for h in results.heavy_hitters] == \
        [(h.item, h.estimate, h.round) for h in sim.heavy_hitters]
    assert sim.ledger is not None
    assert json.loads(results.ledger_json) == json.loads(json.dumps(sim.ledger.to_dict()))
