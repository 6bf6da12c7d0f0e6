"""The networked system as real processes on 127.0.0.1 (OS-chosen ports, TLS from a dev CA):
a discovery over 200 devices finds the planted heavy hitters, reproduces the in-process
per-device simulation exactly for the same test seed, and every service rejects bad requests
with the right status code without changing state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from networked_kit import COORDINATOR_FLAGS, PLANTED, SEED, USERS, planted_dataset, run_config

from fedhh.codec import Codec
from fedhh.config import Mode
from fedhh.data.registry import resolve_dataset
from fedhh.privacy import PrivacyLedger
from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.device_users import enroll_request
from fedhh.rpc.run_config import from_proto
from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh.secagg import RoundKeys
from fedhh.secagg.primitives import system_random
from fedhh.simulation.runner import simulate
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTopology, Path]]:
    root = tmp_path_factory.mktemp("networked")
    data = planted_dataset(root / "users.txt")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as topo:
        topo.start_aggregator()
        topo.start_coordinator(COORDINATOR_FLAGS)
        topo.start_devices("devices-0", str(data), "0:100", ["--seed", str(SEED)])
        topo.start_devices("devices-1", str(data), "100:200", ["--seed", str(SEED)])
        topo.wait_for_devices()
        yield topo, data


def admin(topo: LocalTopology) -> AdminClient:
    return AdminClient(topo.address("coordinator"), topo.token("admin"),
                       topo.workdir / "tls" / "ca.pem")


@pytest.fixture(scope="module")
def finished_run(system: tuple[LocalTopology, Path]) -> tuple[pb.Run, pb.Results]:
    topo, _ = system
    with admin(topo) as client:
        client.start_run(run_config(), run_id="planted")
        run = client.wait("planted", 300)
        return run, client.results("planted")


def test_discovery_finds_the_planted_items(finished_run: tuple[pb.Run, pb.Results]) -> None:
    run, results = finished_run
    assert run.state == "done", run.error
    found = {h.item for h in results.heavy_hitters}
    assert set(PLANTED) <= found
    codec = Codec(run.config.codec, from_proto(run.config).code_bits(Mode.NETWORK))
    for h in results.heavy_hitters:
        assert int.from_bytes(h.code_bytes, "big") == h.code and len(h.code_bytes) == 4
        assert h.ended != h.truncated
        if h.item in PLANTED:
            assert h.ended and h.code == codec.encode(h.item)
    assert all(r.participants == USERS for r in run.rounds if r.state == "released")


def test_networked_run_equals_the_per_device_simulation(
    system: tuple[LocalTopology, Path], finished_run: tuple[pb.Run, pb.Results]
) -> None:
    topo, data = system
    run, results = finished_run
    assert [r.attempt for r in run.rounds] == [1] * len(run.rounds)  # no retried round
    assert all(r.seconds > 0 for r in run.rounds)  # the wall time the operator sees
    dataset = resolve_dataset(str(data), cache_dir=topo.workdir.parent / "cache")
    cfg = run.config
    ledger = PrivacyLedger.open(cfg.eps_agg, cfg.delta, cfg.rounds, cfg.min_devices,
                                eps_local=cfg.eps_local)
    # The run's own configuration, simulated per device with the devices' test seed.
    config = replace(from_proto(cfg), seed=SEED, per_device=True)
    sim = simulate(dataset, config, ledger=ledger)
    networked = [(h.item, h.estimate, h.round) for h in results.heavy_hitters]
    simulated = [(h.item, h.estimate, h.round) for h in sim.heavy_hitters]
    assert networked == simulated
    assert [(r.kept, r.finished) for r in run.rounds] == \
        [(r["kept"], r["finished"]) for r in sim.rounds]
    assert sim.ledger is not None
    assert json.loads(results.ledger_json) == json.loads(json.dumps(sim.ledger.to_dict()))


def test_each_device_process_holds_only_its_own_spent_tokens(
        system: tuple[LocalTopology, Path]) -> None:
    """Issue 28: every device process got the whole tokens file, so any of them could redeem
    the lines of the others' users. Now each gets a file (owner-only) with the tokens of the
    users it hosts and nothing else, and once its devices enrolled no token in it enrolls
    anyone."""
    topo, _ = system
    shares = {}
    for name, users in (("devices-0", range(0, 100)), ("devices-1", range(100, 200))):
        args = topo.services[name].args
        path = Path(args[args.index("--enrollment-tokens-file") + 1])
        assert path.stat().st_mode & 0o077 == 0, path
        shares[name] = [line.split() for line in path.read_text().splitlines()]
        assert [int(u) for u, _ in shares[name]] == list(users)
    tokens = [t for share in shares.values() for _, t in share]
    assert len(set(tokens)) == len(tokens) == USERS
    with grpc.secure_channel(topo.address("coordinator"),
                             ca_credentials(topo.workdir / "tls" / "ca.pem")) as ch:
        stub = pb_grpc.DeviceServiceStub(ch)
        for token in (tokens[0], tokens[-1]):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Enroll(enroll_request(Ed25519PrivateKey.generate(), token.encode()),
                            timeout=30)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_device_api_rejects_bad_requests(system: tuple[LocalTopology, Path]) -> None:
    topo, _ = system
    creds = ca_credentials(topo.workdir / "tls" / "ca.pem")
    with admin(topo) as client:
        token, spare = (t.encode() for t in client.mint_tokens(2))
    with grpc.secure_channel(topo.address("coordinator"), creds) as channel:
        stub = pb_grpc.DeviceServiceStub(channel)
        private = Ed25519PrivateKey.generate()
        key = enroll_request(private, b"").identity_public_key
        cases = [
            (lambda: stub.Enroll(pb.EnrollRequest(enrollment_token=b"wrong" * 4,
                                                  identity_public_key=key)),
             grpc.StatusCode.UNAUTHENTICATED),
            (lambda: stub.Enroll(pb.EnrollRequest(enrollment_token=token,
                                                  identity_public_key=b"short")),
             grpc.StatusCode.INVALID_ARGUMENT),
            # The identity point: any signature "verifies" under it where small-order keys pass.
            (lambda: stub.Enroll(pb.EnrollRequest(enrollment_token=token,
                                                  identity_public_key=(1).to_bytes(32, "little"))),
             grpc.StatusCode.INVALID_ARGUMENT),
            (lambda: stub.GetTask(pb.GetTaskRequest(device_id=1)),
             grpc.StatusCode.UNAUTHENTICATED),
            (lambda: stub.GetTask(pb.GetTaskRequest(device_id=1),
                                  metadata=(("authorization", "Bearer 1." + "00" * 32),)),
             grpc.StatusCode.UNAUTHENTICATED),
            (lambda: stub.GetTask(pb.GetTaskRequest(device_id=1),
                                  metadata=(("authorization", "Bearer nonsense"),)),
             grpc.StatusCode.UNAUTHENTICATED),
        ]
        for call, code in cases:
            with pytest.raises(grpc.RpcError) as error:
                call()
            assert error.value.code() == code  # type: ignore[attr-defined]
        enrolled = stub.Enroll(enroll_request(private, token, label="probe"))
        with pytest.raises(grpc.RpcError) as error:  # the same identity key twice: a replay
            stub.Enroll(enroll_request(private, spare))
        assert error.value.code() == grpc.StatusCode.ALREADY_EXISTS  # type: ignore[attr-defined]
        with pytest.raises(grpc.RpcError) as error:  # a used token enrolls nobody else
            stub.Enroll(enroll_request(Ed25519PrivateKey.generate(), token))
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        bearer = f"Bearer {enrolled.device_id}.{enrolled.credential.hex()}"
        with pytest.raises(grpc.RpcError) as error:  # a valid credential, another device's id
            stub.GetTask(pb.GetTaskRequest(device_id=enrolled.device_id + 1, wait_ms=1),
                         metadata=(("authorization", bearer),))
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        c_pk, s_pk = RoundKeys.generate(system_random).public
        bad_keys = [{}, {"c_pk": c_pk}, {"c_pk": c_pk, "s_pk": c_pk},
                    {"c_pk": c_pk, "s_pk": s_pk[:31]}, {"c_pk": c_pk, "s_pk": bytes(32)}]
        for round_keys in bad_keys:  # missing, equal, short, low-order round keys
            with pytest.raises(grpc.RpcError) as error:
                stub.GetTask(pb.GetTaskRequest(device_id=enrolled.device_id, wait_ms=1,
                                               **round_keys),
                             metadata=(("authorization", bearer),))
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
        idle = stub.GetTask(pb.GetTaskRequest(device_id=enrolled.device_id, wait_ms=1,
                                              c_pk=c_pk, s_pk=s_pk),
                            metadata=(("authorization", bearer),))
        assert idle.WhichOneof("outcome") == "retry_after_ms"


def test_admin_api_rejects_bad_requests(system: tuple[LocalTopology, Path],
                                        finished_run: tuple[pb.Run, pb.Results]) -> None:
    topo, _ = system
    ca = topo.workdir / "tls" / "ca.pem"
    with AdminClient(topo.address("coordinator"), b"not-the-admin-token", ca) as stranger:
        with pytest.raises(grpc.RpcError) as error:
            stranger.runs()
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
    with admin(topo) as client:
        before = [r.run_id for r in client.runs()]
        for config, run_id, code in [
            (run_config(rounds=1), "x1", grpc.StatusCode.INVALID_ARGUMENT),
            (run_config(codec="morse"), "x2", grpc.StatusCode.INVALID_ARGUMENT),
            (run_config(min_devices=2), "x3", grpc.StatusCode.INVALID_ARGUMENT),
            (run_config(), "bad id!", grpc.StatusCode.INVALID_ARGUMENT),
            (run_config(rounds=4), "planted", grpc.StatusCode.ALREADY_EXISTS),
        ]:
            with pytest.raises(grpc.RpcError) as error:
                client.start_run(config, run_id=run_id)
            assert error.value.code() == code, run_id  # type: ignore[attr-defined]
        # (a repeat of its StartRun, a caller's retry, is answered the run, never a second)
        assert client.start_run(run_config(), run_id="planted").state == "done"
        with pytest.raises(grpc.RpcError) as error:
            client.run("no-such-run")
        assert error.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
        assert [r.run_id for r in client.runs()] == before


def test_no_rpc_returns_an_individual_report() -> None:
    """No response of any service can carry a device's report: masked vectors only travel in
    the device's own upload request, and the only vector any response holds is the released
    sum (AggregatorControl.GetResult's ResultChunk, or the combiner's total of a sharded
    round, CombinerControl.GetResult)."""
    from fedhh.v1 import aggregator_pb2, coordinator_pb2

    uploads = {"fedhh.v1.MaskedInputChunk", "fedhh.v1.MaskedInputHeader"}
    for module in (aggregator_pb2, coordinator_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                types = _message_types(method.output_type)
                assert not types & uploads, f"{service.name}.{method.name}"
                if "fedhh.v1.ResultChunk" in types:
                    assert (service.name, method.name) in {("AggregatorControl", "GetResult"),
                                                           ("CombinerControl", "GetResult")}


def _message_types(message, seen: set[str] | None = None) -> set[str]:  # type: ignore[no-untyped-def]
    seen = seen if seen is not None else set()
    if message.full_name not in seen:
        seen.add(message.full_name)
        for field in message.fields:
            if field.message_type is not None:
                _message_types(field.message_type, seen)
    return seen


def test_codes_of_the_planted_items_are_distinct() -> None:
    codes = Codec("5bit", 30).encode_many(list(PLANTED)).codes
    assert np.unique(codes).size == len(PLANTED)


def test_devices_refuse_a_task_above_their_local_epsilon_limit(
    system: tuple[LocalTopology, Path], finished_run: tuple[pb.Run, pb.Results]
) -> None:
    """A coordinator asking for eps_local 12 (devices allow at most 10; the operator raised the
    coordinator's own cap) gets no reports: the round releases nothing and the run fails
    without spending anything."""
    topo, _ = system
    with admin(topo) as client:
        client.start_run(run_config(eps_local=12.0, max_eps_local=12.0, eps_agg=1e6,
                                    max_attempts=1, stage_ms=2000), run_id="greedy")
        run = client.wait("greedy", 120)
    assert run.state == "failed"
    assert run.rounds_released == 0 and run.eps_spent == 0
    assert all(r.state == "aborted" for r in run.rounds)
