"""Probe 36: an enrollment must prove that the caller holds the identity key it enrolls.

Before, the coordinator asked an enrollment for a token and a public key only. A token
presented again with the key it enrolled, within the store's re-issue window (15 minutes, for
a device whose answer was lost), is answered with a new credential that replaces the first: so
whoever had a leaked token and the device's public key (no secret: the aggregator and the
cohort see it) got a credential in the device's place, and the device was locked out (its
credential refused at its next check-in). Now the request carries the key's Ed25519 signature
over a domain-separated proof binding the token, the key, the label and the attestation
(fedhh/rpc/device_users.py), checked before the token is spent or a credential re-issued.

Served in this process by the coordinator's own DeviceService on a port from the OS."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import grpc
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc import serving
from fedhh.rpc.device_users import enroll_request, enrollment_proof
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator import auth
from fedhh_coordinator.enrollment import OneTimeTokens, RateLimiter, mint
from fedhh_coordinator.service import DeviceService
from fedhh_coordinator.store import Store

T = TypeVar("T")

# The vector clients/web/test/enrollment_proof.test.ts pins for the web device: seed 00..1f,
# token "ab" * 32, label "web-é", no attestation.
VECTOR_PUBLIC = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
VECTOR_PROOF = (
    "66656468682f76312f656e726f6c6c6d656e742d70726f6f6600"
    "271a413bd339c5709fdceaec41f14f11e9fbfb5042d72d331c65f32b284cd09a"
    "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
    "76fb2af69670bfb7e346bd118da7f84f67125857c7fd862f7f11020bc565829d"
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
VECTOR_SIGNATURE = (
    "0867bdbd7f41240a1e800ed687505a78a30cacb5097464014e01ccdfe02b9177"
    "5757ccd81b58d453cc19e4ac220d1b6d4664bc5dbf0f669978f6c81865e97006")


def raw_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw,
                                         serialization.PublicFormat.Raw)


async def served(store: Store, body: Callable[[pb_grpc.DeviceServiceStub], Awaitable[T]]) -> T:
    devices = DeviceService(store, lobby=None, key=Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                            verifier=OneTimeTokens(), enroll_limit=RateLimiter(1000.0, 1000))
    server = serving.new_server()
    pb_grpc.add_DeviceServiceServicer_to_server(devices, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            return await body(pb_grpc.DeviceServiceStub(channel))
    finally:
        await server.stop(None)


async def refusal(stub: pb_grpc.DeviceServiceStub, request: pb.EnrollRequest
                  ) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await stub.Enroll(request, timeout=30)
    return error.value.code(), error.value.details() or ""


def forgeries(token: bytes, victim: bytes) -> list[tuple[str, pb.EnrollRequest,
                                                         grpc.StatusCode, str]]:
    """What someone holding the token and the victim's public key, not its private key, can
    send: each with the status and the words it must be refused with."""
    mine = Ed25519PrivateKey.generate()
    proof = enrollment_proof(token, victim, "user-7", b"")
    plain = pb.EnrollRequest(enrollment_token=token, identity_public_key=victim, label="user-7")
    signed_by_me = pb.EnrollRequest(enrollment_token=token, identity_public_key=victim,
                                    label="user-7", enrollment_signature=mine.sign(proof))
    short = pb.EnrollRequest(enrollment_token=token, identity_public_key=victim, label="user-7",
                             enrollment_signature=mine.sign(proof)[:63])
    unauth, invalid = grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INVALID_ARGUMENT
    return [("unsigned", plain, unauth, "enrollment_signature is missing"),
            ("signed with another key", signed_by_me, unauth,
             "enrollment_signature does not verify under identity_public_key"),
            ("a 63-byte signature", short, invalid,
             "enrollment_signature must be a 64-byte Ed25519 signature, got 63 bytes")]


def test_a_leaked_token_and_public_key_cannot_take_over_an_enrolled_device(
        tmp_path: Path) -> None:
    """Before: the forged request, within 15 minutes of the device's enrollment, got the
    device's id and a new credential, and the device's own credential was refused from then
    on. Now every forgery is refused, and the device's credential is the one still stored."""
    store = Store(tmp_path / "c.sqlite")
    token = mint(store, 1)[0].encode()
    device_key = Ed25519PrivateKey.generate()
    victim = raw_public(device_key)

    async def body(stub: pb_grpc.DeviceServiceStub) -> None:
        enrolled = await stub.Enroll(enroll_request(device_key, token, "user-7"), timeout=30)
        before = store.device(enrolled.device_id)
        counts = store.enrollment()
        for name, request, code, words in forgeries(token, victim):
            got = await refusal(stub, request)
            assert got[0] == code and words in got[1], (name, got)
            assert store.device(enrolled.device_id) == before, name
            assert store.enrollment() == counts, name
        record = store.device(enrolled.device_id)
        assert record is not None
        auth.verify_device(record[0], enrolled.credential)  # the device is not locked out

    asyncio.run(served(store, body))


def test_a_leaked_unused_token_cannot_enroll_someone_elses_key(tmp_path: Path) -> None:
    """A forged first enrollment is refused too, and the token stays unused for its device."""
    store = Store(tmp_path / "c.sqlite")
    token = mint(store, 1)[0].encode()
    device_key = Ed25519PrivateKey.generate()

    async def body(stub: pb_grpc.DeviceServiceStub) -> pb.EnrollResponse:
        for name, request, code, words in forgeries(token, raw_public(device_key)):
            got = await refusal(stub, request)
            assert got[0] == code and words in got[1], (name, got)
        assert (store.enrollment().devices, store.enrollment().tokens_unused) == (0, 1)
        return await stub.Enroll(enroll_request(device_key, token, "user-7"), timeout=30)

    enrolled = asyncio.run(served(store, body))
    assert store.device(enrolled.device_id) is not None


def test_the_device_retrying_within_the_window_is_answered_again(tmp_path: Path) -> None:
    """The re-issue window still serves the device that lost its answer: the same signed
    request gets the same id and a credential that replaces the lost one."""
    store = Store(tmp_path / "c.sqlite")
    token = mint(store, 1)[0].encode()
    device_key = Ed25519PrivateKey.generate()
    request = enroll_request(device_key, token, "user-7")
    assert enroll_request(device_key, token, "user-7") == request  # a retry is the same bytes

    async def body(stub: pb_grpc.DeviceServiceStub) -> tuple[pb.EnrollResponse, ...]:
        return (await stub.Enroll(request, timeout=30), await stub.Enroll(request, timeout=30))

    lost, retried = asyncio.run(served(store, body))
    assert retried.device_id == lost.device_id
    assert retried.credential != lost.credential
    record = store.device(retried.device_id)
    assert record is not None
    auth.verify_device(record[0], retried.credential)
    assert (store.enrollment().devices, store.enrollment().tokens_used) == (1, 1)


def test_the_signature_binds_token_label_and_attestation(tmp_path: Path) -> None:
    """A signed request whose token, label or attestation was changed after signing is
    refused: it cannot be spent with another token (another coordinator's, say) either."""
    store = Store(tmp_path / "c.sqlite")
    first, second = (t.encode() for t in mint(store, 2))
    key = Ed25519PrivateKey.generate()
    signed = enroll_request(key, first, "user-7")
    changed = [pb.EnrollRequest(enrollment_token=second, identity_public_key=signed.
                                identity_public_key, label="user-7",
                                enrollment_signature=signed.enrollment_signature)]
    for field, value in (("label", "user-8"), ("attestation", b"x")):
        other = pb.EnrollRequest()
        other.CopyFrom(signed)
        setattr(other, field, value)
        changed.append(other)

    async def body(stub: pb_grpc.DeviceServiceStub) -> None:
        for request in changed:
            code, details = await refusal(stub, request)
            assert code == grpc.StatusCode.UNAUTHENTICATED, details
            assert "does not verify" in details
        assert store.enrollment().tokens_unused == 2

    asyncio.run(served(store, body))


def test_the_proof_is_the_web_devices_byte_for_byte() -> None:
    """The vector the web device's node test pins (clients/web/test/enrollment_proof.test.ts)."""
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    request = enroll_request(key, b"ab" * 32, "web-\u00e9")
    assert request.identity_public_key.hex() == VECTOR_PUBLIC
    assert enrollment_proof(request.enrollment_token, request.identity_public_key,
                            request.label, request.attestation).hex() == VECTOR_PROOF
    assert request.enrollment_signature.hex() == VECTOR_SIGNATURE
