"""RequestEncoder writes, from parts encoded once per round, exactly the bytes protobuf writes for
the same AwaitStageResponse and SessionEvent (any ids, empty lists, large values)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.rpc.aggregator_wire import (
    RequestEncoder,
    RequestForm,
    _IdVarints,
    request_from_pb,
    roster_entry_to_pb,
    stage_to_pb,
)
from fedhh.secagg import Stage
from fedhh.secagg.config import Admission
from fedhh.secagg.device import SHARE_CIPHERTEXT_BYTES, DeviceState
from fedhh.secagg.errors import SecAggAbort
from fedhh.secagg.messages import (
    AdvertiseKeys,
    ConsistencyRequest,
    EncryptedShare,
    MaskedInputRequest,
    RingRun,
    ShareBundle,
    ShareKeysRequest,
    UnmaskRequest,
)
from fedhh.secagg.simulate import SimulatedRound, make_cohort
from fedhh.v1 import aggregator_pb2 as pb

SID = b"s" * 32
ids = st.integers(min_value=0, max_value=2**32 - 1)
blobs = st.binary(max_size=300)


def _entry(device_id: int, key: bytes, with_admission: bool) -> AdvertiseKeys:
    admission = Admission(device_id, key, key, key, key * 3) if with_admission else None
    return AdvertiseKeys(SID, device_id, key, key[::-1], admission)


def _ready(**request: object) -> bytes:
    return pb.AwaitStageResponse(status=pb.AWAIT_STATUS_READY, **request).SerializeToString()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ids, st.binary(min_size=0, max_size=40), st.booleans()),
                max_size=20, unique_by=lambda t: t[0]), st.data())
def test_roster_runs_are_protobufs_encoding(entries: list[tuple[int, bytes, bool]],
                                            data: st.DataObject) -> None:
    """A roster that is a run of a ring (across its seam or not, empty, all of it) encodes as
    the tuple of its entries does, one ring after another in one encoder."""
    encoder = RequestEncoder()
    for _ in range(2):
        ring = tuple(_entry(*e) for e in entries)
        size = len(ring)
        for _ in range(3):
            start = data.draw(st.integers(0, size))
            stop = data.draw(st.integers(start, min(start + size, 2 * size)))
            span = RingRun(ring, start, stop)
            proof = data.draw(st.binary(max_size=200))
            plain = ShareKeysRequest(SID, 1, tuple(span), proof)
            assert encoder.ready(ShareKeysRequest(SID, 1, span, proof)) == encoder.ready(plain) \
                == _ready(share_keys=pb.ShareKeysRequest(
                    entries=map(roster_entry_to_pb, tuple(span)), range_proof=proof))
        entries = entries[::-1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ids, st.binary(min_size=0, max_size=40), st.booleans()),
                max_size=20, unique_by=lambda t: t[0]))
def test_rosters_are_protobufs_encoding(entries: list[tuple[int, bytes, bool]]) -> None:
    """Each entry is its id and keys (its admission's proof left out), and the one range proof
    follows them."""
    encoder = RequestEncoder()
    roster = tuple(_entry(*e) for e in entries)
    proof = bytes(range(64))
    expected = _ready(share_keys=pb.ShareKeysRequest(
        entries=[roster_entry_to_pb(e) for e in roster], range_proof=proof))
    # twice: the second answer is built from the memoised entries
    for _ in range(2):
        assert encoder.ready(ShareKeysRequest(SID, 1, roster, proof)) == expected
    decoded = request_from_pb(SID, 1, pb.AwaitStageResponse.FromString(expected))
    assert isinstance(decoded, ShareKeysRequest) and decoded.range_proof == proof
    for entry, back in zip(roster, decoded.roster, strict=True):
        assert (back.device_id, back.c_pk, back.s_pk) == (entry.device_id, entry.c_pk, entry.s_pk)
        if entry.admission is None or not entry.admission.identity_key:
            assert back.admission is None
        else:
            assert back.admission == Admission(entry.device_id, entry.admission.identity_key,
                                               entry.c_pk, entry.s_pk, b"")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ids, ids, blobs), max_size=20))
def test_shares_are_protobufs_encoding(shares: list[tuple[int, int, bytes]]) -> None:
    request = MaskedInputRequest(SID, 1, tuple(EncryptedShare(*s) for s in shares))
    expected = _ready(masked_input=pb.MaskedInputRequest(shares=[
        pb.EncryptedShare(src=a, dst=b, ciphertext=c) for a, b, c in shares]))
    assert RequestEncoder().ready(request) == expected


@settings(max_examples=80, deadline=None)
@given(ids, st.lists(ids, max_size=40), st.integers(min_value=1, max_value=200), st.data())
def test_routed_shares_are_protobufs_encoding(dst: int, senders: list[int], width: int,
                                              data: st.DataObject) -> None:
    """A bundle routed to one device (the server's masked-input requests, written without
    protobuf): any sender ids, any ciphertext width (one above 127 has a two-byte length)."""
    blob = data.draw(st.binary(min_size=width * len(senders), max_size=width * len(senders)))
    bundle = ShareBundle(dst, tuple(senders), blob, width)
    expected = _ready(masked_input=pb.MaskedInputRequest(shares=[
        pb.EncryptedShare(src=s.src, dst=s.dst, ciphertext=s.ciphertext) for s in bundle]))
    assert RequestEncoder().ready(MaskedInputRequest(SID, dst, bundle)) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(ids, max_size=300))
def test_survivor_sets_are_protobufs_encoding(survivors: list[int]) -> None:
    encoder = RequestEncoder()
    shared = tuple(survivors)
    expected = _ready(consistency_check=pb.ConsistencyRequest(survivors=survivors))
    for device_id in (1, 2):  # every device's request holds the same set
        assert encoder.ready(ConsistencyRequest(SID, device_id, shared)) == expected
    other = (*shared, 7)  # another set is encoded anew, not taken for the memoised one
    assert encoder.ready(ConsistencyRequest(SID, 3, other)) == _ready(
        consistency_check=pb.ConsistencyRequest(survivors=other))


def _bitmap(survivors: set[int]) -> bytes:
    """The bitmap as aggregator.proto defines it, from the integer whose bit i - 1 is set
    for each survivor i (independent of the encoder's NumPy)."""
    value = sum(1 << (i - 1) for i in survivors)
    return value.to_bytes((value.bit_length() + 7) // 8, "little")


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(list(Stage)), st.sets(st.integers(min_value=1, max_value=30_000),
                                             max_size=300),
       st.sampled_from([RequestForm.SURVIVOR_BITS,
                        RequestForm.SURVIVOR_BITS | RequestForm.PACKED_SHARES]))
def test_survivor_bits_are_protobufs_encoding(stage: Stage, survivors: set[int],
                                              form: RequestForm) -> None:
    """To a device whose open said ``survivor_bits``: U3 as the bitmap, protobuf's bytes for
    ConsistencyRequest(survivor_bits=...), which reads back as the same increasing ids; to any
    other device of the same round, the ids."""
    shared = tuple(sorted(survivors))
    encoder = RequestEncoder()
    for _ in range(2):  # the second from the memoised forms
        bits = encoder.event(stage, ConsistencyRequest(SID, 1, shared), form)
        assert bits == pb.SessionEvent(stage=stage_to_pb(stage), next=pb.AwaitStageResponse(
            status=pb.AWAIT_STATUS_READY, consistency_check=pb.ConsistencyRequest(
                survivor_bits=_bitmap(survivors)))).SerializeToString()
        plain = encoder.event(stage, ConsistencyRequest(SID, 2, shared))
        assert pb.SessionEvent.FromString(plain).next.consistency_check.survivors == list(shared)
        for event in (bits, plain):
            parsed = request_from_pb(SID, 1, pb.SessionEvent.FromString(event).next)
            assert isinstance(parsed, ConsistencyRequest) and parsed.survivors == shared


@pytest.mark.parametrize("overlap", [True, False])
def test_survivors_in_both_forms_reach_the_device_as_ids_then_bits(overlap: bool) -> None:
    """A request with both fields holds the ids, then the bitmap's: ids that do not increase
    across the two (one set twice) are refused by the device's check, MALFORMED; two parts
    that do increase are one set, checked as any other."""
    cohort = make_cohort(8, 16, 4, 3, n_min=4, device_auth=True, consistency_check=True)
    driver = SimulatedRound(cohort, {})
    while driver.server.stage < Stage.CONSISTENCY_CHECK:
        driver.step()
    u = 1
    survivors = driver.pending[u].survivors
    cut = len(survivors) // 2
    bits_from = cut - 1 if overlap else cut  # (overlapping: the last id of the list again)
    message = pb.ConsistencyRequest(survivors=survivors[:cut],
                                    survivor_bits=_bitmap(set(survivors[bits_from:])))
    request = request_from_pb(cohort.session_id, u, pb.AwaitStageResponse(
        status=pb.AWAIT_STATUS_READY, consistency_check=message))
    assert isinstance(request, ConsistencyRequest)
    device = driver.devices[u]
    if overlap:
        assert request.survivors == (*survivors[:cut], *survivors[bits_from:])
        with pytest.raises(SecAggAbort, match="increasing"):
            device.consistency_check(request)
        assert device.state == DeviceState.ABORTED
    else:
        assert request.survivors == survivors
        assert device.consistency_check(request).signature


@settings(max_examples=60, deadline=None)
@given(st.lists(ids, max_size=30), st.lists(ids, max_size=30),
       st.lists(st.tuples(ids, blobs), max_size=20, unique_by=lambda t: t[0]))
def test_unmask_requests_are_protobufs_encoding(alive: list[int], dropped: list[int],
                                                signatures: list[tuple[int, bytes]]) -> None:
    encoder = RequestEncoder()
    expected = _ready(unmask=pb.UnmaskRequest(alive=alive, dropped=dropped, signatures=[
        pb.NeighbourSignature(device_id=i, signature=s) for i, s in signatures]))
    for _ in range(2):
        assert encoder.ready(UnmaskRequest(SID, 1, tuple(alive), tuple(dropped),
                                           tuple(signatures))) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ids, blobs), max_size=20, unique_by=lambda t: t[0]), st.data())
def test_signature_runs_are_protobufs_encoding(pairs: list[tuple[int, bytes]],
                                               data: st.DataObject) -> None:
    """Signatures that are a run of a ring less one item (its device's own) encode as the
    tuple of them does, across the seam or not."""
    encoder = RequestEncoder()
    ring = tuple(pairs)
    size = len(ring)
    for _ in range(4):
        start = data.draw(st.integers(0, size))
        stop = data.draw(st.integers(start, min(start + size, 2 * size)))
        skip = data.draw(st.none() | st.integers(start, stop - 1)) if stop > start else None
        run = RingRun(ring, start, stop, None if skip is None else skip % size)
        expected = _ready(unmask=pb.UnmaskRequest(alive=[3], signatures=[
            pb.NeighbourSignature(device_id=i, signature=s) for i, s in tuple(run)]))
        assert encoder.ready(UnmaskRequest(SID, 1, (3,), (), run)) == expected
        assert encoder.ready(UnmaskRequest(SID, 1, (3,), (), tuple(run))) == expected


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(list(Stage)), st.lists(st.tuples(ids, ids, blobs), max_size=20),
       st.lists(ids, max_size=200))
def test_session_events_are_protobufs_encoding(stage: Stage,
                                               shares: list[tuple[int, int, bytes]],
                                               survivors: list[int]) -> None:
    """``event`` is the SessionEvent for ``stage`` around the answer ``ready`` encodes, for
    every kind of request (lengths of one and of several varint bytes)."""
    encoder = RequestEncoder()
    roster = tuple(_entry(i, b"k" * 32, True) for i in (5, 300, 70_000))
    for request in (ShareKeysRequest(SID, 1, roster),
                    MaskedInputRequest(SID, 1, tuple(EncryptedShare(*s) for s in shares)),
                    ConsistencyRequest(SID, 1, tuple(survivors)),
                    UnmaskRequest(SID, 1, tuple(survivors), (), ((2, b"s" * 64),))):
        answer = pb.AwaitStageResponse.FromString(encoder.ready(request))
        expected = pb.SessionEvent(stage=stage_to_pb(stage), next=answer).SerializeToString()
        assert encoder.event(stage, request) == expected


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(list(Stage)), st.integers(min_value=1, max_value=2**32 - 1),
       st.lists(ids, max_size=40), st.data())
def test_packed_routed_shares_are_protobufs_encoding(stage: Stage, dst: int, senders: list[int],
                                                     data: st.DataObject) -> None:
    """To a device whose open said ``packed_requests``: the senders and their ciphertexts as
    two fields, protobuf's bytes for MaskedInputRequest(srcs, ciphertexts); read back, the
    same shares (the device takes them as a bundle); to any other device, one entry per
    share as before."""
    width = SHARE_CIPHERTEXT_BYTES
    blob = data.draw(st.binary(min_size=width * len(senders), max_size=width * len(senders)))
    bundle = ShareBundle(dst, tuple(senders), blob, width)
    request = MaskedInputRequest(SID, dst, bundle)
    encoder = RequestEncoder()
    packed = pb.SessionEvent.FromString(encoder.event(stage, request, RequestForm.PACKED_SHARES))
    assert packed.SerializeToString() == pb.SessionEvent(
        stage=stage_to_pb(stage), next=pb.AwaitStageResponse(
            status=pb.AWAIT_STATUS_READY, masked_input=pb.MaskedInputRequest(
                srcs=senders, ciphertexts=blob))).SerializeToString()
    plain = pb.SessionEvent.FromString(encoder.event(stage, request))
    assert not plain.next.masked_input.srcs and len(plain.next.masked_input.shares) == len(senders)
    for event in (packed, plain):
        parsed = request_from_pb(SID, dst, event.next)
        assert isinstance(parsed, MaskedInputRequest)
        assert tuple(parsed.shares) == tuple(bundle)
    assert isinstance(request_from_pb(SID, dst, packed.next).shares, ShareBundle) or not senders


@pytest.mark.parametrize("cut", ["one byte short", "one byte over", "no senders",
                                 "beside entries"])
def test_a_malformed_packed_request_reaches_the_device_as_shares_it_refuses(cut: str) -> None:
    """A packed form without one ciphertext per sender (or beside the entries) is read as
    entries cut from it: the device's checks of each share then abort its round."""
    cohort = make_cohort(8, 16, 4, 3, n_min=4)
    driver = SimulatedRound(cohort, {})
    while driver.server.stage < Stage.MASKED_INPUT:
        driver.step()
    u = 1
    bundle = driver.pending[u].shares
    assert isinstance(bundle, ShareBundle)
    srcs, blob = list(bundle.senders), bundle.blob
    message = {"one byte short": pb.MaskedInputRequest(srcs=srcs, ciphertexts=blob[:-1]),
               "one byte over": pb.MaskedInputRequest(srcs=srcs, ciphertexts=blob + b"x"),
               "no senders": pb.MaskedInputRequest(ciphertexts=blob),
               "beside entries": pb.MaskedInputRequest(srcs=srcs, ciphertexts=blob, shares=[
                   pb.EncryptedShare(src=s.src, dst=s.dst, ciphertext=s.ciphertext)
                   for s in bundle][:1])}[cut]
    request = request_from_pb(cohort.session_id, u, pb.AwaitStageResponse(
        status=pb.AWAIT_STATUS_READY, masked_input=message))
    assert isinstance(request, MaskedInputRequest) and not isinstance(request.shares,
                                                                      ShareBundle)
    device = driver.devices[u]
    with pytest.raises(SecAggAbort):
        device.masked_input(request, np.array([0]))
    assert device.state == DeviceState.ABORTED


def test_the_encoded_ids_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_IdVarints, "HELD", 4)
    encoded = _IdVarints()
    for device_id in (1, 127, 128, 300, 2**14, 2**32 - 1, 1, 300):
        expected = pb.UnmaskRequest(alive=[device_id]).SerializeToString()[2:]
        assert encoded[device_id] == expected  # (the packed field's tag and length cut off)
    assert sorted(encoded) == [1, 127, 128, 300]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("bits", [False, True])
def test_the_request_form_is_what_the_open_asks_for(packed: bool, bits: bool) -> None:
    form = RequestForm.of(pb.SessionOpen(packed_requests=packed, survivor_bits=bits))
    assert isinstance(form, RequestForm)
    assert (RequestForm.PACKED_SHARES in form, RequestForm.SURVIVOR_BITS in form) == (packed,
                                                                                     bits)
    assert form == ((RequestForm.PACKED_SHARES if packed else RequestForm.PLAIN)
                    | (RequestForm.SURVIVOR_BITS if bits else RequestForm.PLAIN))
