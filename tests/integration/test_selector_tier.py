"""Selectors with real processes (docs/scaling.md, "Selectors"): a leader coordinator, two
selectors on its store, an aggregator and 200 devices spread over the selectors. A selector
killed during the SecAgg+ stages costs nothing (its devices have their tasks) and the round
releases, charged once; a selector killed during check-in sends its devices to the other one
and the run finishes; the leader refuses a selector without the selector token, and a batch
that breaks the contract with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from networked_kit import (
    COORDINATOR_FLAGS,
    PLANTED,
    SEED,
    planted_dataset,
    run_config,
    short_dataset,
    wait_for_line,
)

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2 as pb

pytestmark = pytest.mark.slow


def topology(root: Path) -> LocalTopology:
    topo = LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")})
    topo.start_aggregator()
    topo.start_coordinator(COORDINATOR_FLAGS)
    topo.start_selector("selector-0")
    topo.start_selector("selector-1")
    return topo


def admin(topo: LocalTopology) -> AdminClient:
    return AdminClient(topo.address("coordinator"), topo.token("admin"),
                       topo.workdir / "tls" / "ca.pem")


def spends(results) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return [(s["round_index"], s["contributors"])
            for s in json.loads(results.ledger_json)["spends"]]


def delivered(log: Path) -> list[int]:
    """The members a selector handed their tasks, per check-in (its "tasks delivered" lines)."""
    return [json.loads(line)["members"] for line in log.read_text().splitlines()
            if '"message": "tasks delivered"' in line]


def test_a_selector_killed_mid_round_costs_nothing_and_the_round_is_charged_once(
    tmp_path: Path,
) -> None:
    data = planted_dataset(tmp_path / "users.txt")
    with topology(tmp_path) as topo, admin(topo) as client:
        for i, users in enumerate(("0:100", "100:200")):
            # Seeded: every round holds all 200 devices, so the sums, and what is found, are
            # the per-device simulation's (test_networked_system.py), not a draw that missed
            # "cherr" once in CI.
            topo.start_devices(f"devices-{i}", str(data), users, ["--seed", str(SEED)],
                               first_selector=i)
        topo.wait_for_devices()
        # Three rounds of the planted words; a round needs 150 of the 200 devices.
        client.start_run(run_config(min_devices=150, checkin_ms=120_000), run_id="kill")
        # The first round's tasks are out and its devices are in the protocol.
        wait_for_line(topo.services["aggregator"].log, '"stage": "ADVERTISE_KEYS"')
        before = delivered(topo.services["selector-0"].log)
        topo.kill("selector-0")
        # A deadline, not a window: alone the run takes ~25 s, but under CI's load (both cores
        # busy, three test workers) a run once passed 300 s while the killed selector's
        # hundred devices moved to the other one.
        run = client.wait("kill", 900)
        results = client.results("kill")
        after = delivered(topo.services["selector-1"].log)
    assert run.state == "done", run.error
    # Both selectors handed out tasks of the first round: the devices were spread over them.
    assert len(before) == 1 and before[0] > 0 and after[0] > 0
    assert before[0] + after[0] == 200
    released = [r for r in run.rounds if r.state == "released"]
    assert [r.round for r in released] == [1, 2, 3] and all(r.participants == 200
                                                            for r in released), run.rounds
    assert len(run.rounds) == 3  # no attempt lost
    # The later rounds' devices all came through the selector that lived.
    assert after[1:] == [200, 200]
    # Each round charged once, at its verified contributors.
    assert spends(results) == [(0, 200), (1, 200), (2, 200)]
    assert set(PLANTED) <= {h.item for h in results.heavy_hitters}


def test_a_selector_killed_during_check_in_sends_its_devices_to_the_other(
    tmp_path: Path,
) -> None:
    data = short_dataset(tmp_path / "users.txt")
    with topology(tmp_path) as topo, admin(topo) as client:
        topo.start_devices("devices-0", str(data), "0:100")
        topo.wait_for_devices()
        # The check-in needs all 200 devices, and the second hundred is not there yet: it is
        # still open when selector-0, which holds about half of the first hundred, dies.
        client.start_run(run_config(rounds=1, max_bits=10, dim_limit=1 << 10, min_devices=200,
                                    checkin_ms=180_000, stage_ms=15_000), run_id="move")
        wait_for_line(topo.services["selector-0"].log, '"message": "check-in opened"')
        topo.kill("selector-0")
        topo.start_devices("devices-1", str(data), "100:200", first_selector=1)
        run = client.wait("move", 300)
        results = client.results("move")
        # (the leader's own word that it let selector-0 go: hub.py's detach)
        wait_for_line(topo.services["coordinator"].log,
                      '"message": "selector detached", "service": "coordinator", '
                      '"selector": "selector-0"')
        after = delivered(topo.services["selector-1"].log)
    assert run.state == "done", run.error
    assert [(r.state, r.participants) for r in run.rounds] == [("released", 200)]
    assert after == [200]
    assert spends(results) == [(0, 200)]


def test_the_leader_refuses_a_selector_without_the_token_and_a_bad_batch(
    tmp_path: Path,
) -> None:
    with LocalTopology(tmp_path / "topology",
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        topo.start_aggregator()
        topo.start_coordinator(COORDINATOR_FLAGS)
        credentials = ca_credentials(str(topo.workdir / "tls" / "ca.pem"))

        def attach(token: str, batches: list[pb.SelectorBatch | bytes]) -> grpc.RpcError:
            with grpc.secure_channel(topo.address("coordinator"), credentials) as channel:
                # (raw bytes in: a message that does not parse goes out as it is)
                attach_call = channel.stream_stream("/fedhh.v1.SelectorControl/Attach")
                call = attach_call(
                    (b if isinstance(b, bytes) else b.SerializeToString() for b in batches),
                    metadata=(("authorization", f"Bearer {token}"),), timeout=30)
                with pytest.raises(grpc.RpcError) as refused:
                    for _ in call:
                        pass
                return refused.value

        unauthenticated = attach("x" * 32, [pb.SelectorBatch(name="intruder")])
        assert unauthenticated.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "invalid selector token" in unauthenticated.details()
        token = topo.token("selector").decode()
        bad = attach(token, [pb.SelectorBatch(name="s"), pb.SelectorBatch(
            presented=[pb.CheckIn(device_id=1, c_pk=b"k" * 31, s_pk=b"j" * 32)])])
        assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "round keys must be two distinct 32-byte keys" in bad.details()
        nameless = attach(token, [pb.SelectorBatch()])
        assert nameless.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "names the selector" in nameless.details()
        # Messages that do not parse, as the hello and after it.
        garbage = b"\xff\xff\xff\xff"
        hellos: list[list[pb.SelectorBatch | bytes]] = [[garbage],
                                                        [pb.SelectorBatch(name="s"), garbage]]
        for batches in hellos:
            garbled = attach(token, batches)
            assert garbled.code() == grpc.StatusCode.INVALID_ARGUMENT, garbled
            assert "does not parse" in garbled.details()
