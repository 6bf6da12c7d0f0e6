"""A coordinator restarted over the same store with another signing key (its key file lost
with a volume that was not kept, and a new one made in its place; another file named) is
refused at start, naming both keys, and changes nothing; given its own key back it serves the
same devices. Against real processes on 127.0.0.1.

Before: the coordinator made a new key where the file was missing and served with it; every
enrolled device (which pins the coordinator's key at enrollment) refused every task, and each
run failed after its attempts with "the aggregator aborted the round: too_few_devices"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import StateError
from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.credentials import load_or_create_signing_key, public_key_path, raw_public
from fedhh.rpc.device_users import enroll_request
from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.main import key_fingerprint
from fedhh_coordinator.store import Store

pytestmark = pytest.mark.slow


def enroll_one(topo: LocalTopology) -> pb.EnrollResponse:
    ca = topo.workdir / "tls" / "ca.pem"
    with AdminClient(topo.address("coordinator"), topo.token("admin"), ca) as admin:
        token = admin.mint_tokens(1)[0]
    with grpc.secure_channel(topo.address("coordinator"), ca_credentials(ca)) as channel:
        return pb_grpc.DeviceServiceStub(channel).Enroll(
            enroll_request(Ed25519PrivateKey.generate(), token.encode()), timeout=30)


def refusal(topo: LocalTopology) -> str:
    with pytest.raises(StateError) as error:
        topo.start_coordinator()
    return str(error.value)


def test_a_coordinator_with_another_key_than_its_devices_pinned_is_refused(tmp_path: Path
                                                                           ) -> None:
    with LocalTopology(tmp_path / "topology", env={"FEDHH_CACHE": str(tmp_path / "cache")}) \
            as topo:
        topo.start_aggregator()
        topo.start_coordinator()
        pinned = enroll_one(topo).coordinator_public_key
        assert pinned == raw_public(load_or_create_signing_key(topo.signing_key))
        topo.stop("coordinator")
        original = topo.signing_key.read_bytes()
        pub = public_key_path(topo.signing_key)
        original_pub = pub.read_bytes()

        # The key file is gone (its volume was not kept): no new key is made in its place.
        topo.signing_key.unlink()
        said = refusal(topo)
        assert "does not exist, but the store" in said and "1 enrolled device," in said
        assert key_fingerprint(pinned) in said
        assert not topo.signing_key.exists() and pub.read_bytes() == original_pub

        # Another key file is named: refused, naming both keys; neither file is touched.
        other = load_or_create_signing_key(tmp_path / "other.pem")
        topo.signing_key.write_bytes((tmp_path / "other.pem").read_bytes())
        said = refusal(topo)
        assert f"(key {key_fingerprint(raw_public(other))}) is not the key of the store" in said
        assert f"(key {key_fingerprint(pinned)})" in said
        assert pub.read_bytes() == original_pub

        # Its own key back: it serves, and the device's tasks are signed by what it pinned.
        topo.signing_key.write_bytes(original)
        topo.start_coordinator()
        assert enroll_one(topo).coordinator_public_key == pinned


def test_a_store_without_devices_takes_a_new_key(tmp_path: Path) -> None:
    """Nothing pinned a key yet: a coordinator may start over the store with another."""
    with LocalTopology(tmp_path / "topology", env={"FEDHH_CACHE": str(tmp_path / "cache")}) \
            as topo:
        topo.start_aggregator()
        topo.start_coordinator()
        topo.stop("coordinator")
        topo.signing_key.unlink()
        topo.start_coordinator()
        made = raw_public(load_or_create_signing_key(topo.signing_key))
        assert enroll_one(topo).coordinator_public_key == made


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "store.sqlite")
        return
    from postgres_kit import PostgresServer

    with PostgresServer() as pg:
        yield pg.create_database()


def test_the_key_is_kept_by_either_engine(location: str) -> None:
    """What the start checks against, on SQLite and on PostgreSQL: none recorded in a new
    store, the key recorded, kept across reopening, counted with the devices."""
    public = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    store = Store(location)
    try:
        assert store.signing_key() == (None, 0)
        store.record_signing_key(public)
        store.add_device(b"h" * 32, b"k" * 32, "")
    finally:
        store.close()
    store = Store(location)
    try:
        assert store.signing_key() == (public, 1)
    finally:
        store.close()
