"""The session stream's packed shares (``SessionShares.dsts``/``ciphertexts``, ``SessionUnmask``'s
owners and values): a device's message in either form converts to the same library message,
and a malformed packed message is a protocol violation before it reaches a round."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.rpc.aggregator_wire import (
    session_shares,
    session_unmask,
    shares_from_pb,
    unmask_from_pb,
)
from fedhh.secagg import EncryptedShare, ProtocolViolation, ShareKeysResponse, Violation
from fedhh.secagg.device import SHARE_CIPHERTEXT_BYTES
from fedhh.secagg.messages import OwnerShares, ShareBundle, UnmaskResponse
from fedhh.secagg.shamir import SHARE_BYTES

SID = b"s" * 32
ids = st.lists(st.integers(min_value=0, max_value=2**32 - 1), max_size=40, unique=True)


@settings(max_examples=40, deadline=None)
@given(ids)
def test_packed_shares_convert_to_the_shares_sent_one_by_one(dsts: list[int]) -> None:
    message = ShareKeysResponse(SID, 7, tuple(
        EncryptedShare(7, d, os.urandom(SHARE_CIPHERTEXT_BYTES)) for d in dsts), bytes(32))
    packed = session_shares(message, True).shares
    one_by_one = session_shares(message, False).shares
    assert len(packed.shares) == 0 and len(one_by_one.dsts) == 0
    taken = shares_from_pb(7, packed, SID)
    assert taken == shares_from_pb(7, one_by_one, SID) == message
    assert isinstance(taken.shares, ShareBundle) == bool(dsts)
    # A device's own bundle (what SecAggDevice.share_keys returns) goes out as the same bytes.
    bundle = ShareBundle.sent_by(7, tuple(dsts), b"".join(s.ciphertext for s in message.shares),
                                 SHARE_CIPHERTEXT_BYTES)
    as_bundle = ShareKeysResponse(SID, 7, bundle, bytes(32))
    assert session_shares(as_bundle, True) == session_shares(message, True)
    assert session_shares(as_bundle, False) == session_shares(message, False)


@settings(max_examples=40, deadline=None)
@given(ids, ids)
def test_packed_unmask_shares_convert_to_the_pairs(alive: list[int], dropped: list[int]) -> None:
    message = UnmaskResponse(SID, 7, tuple((o, os.urandom(SHARE_BYTES)) for o in alive),
                             tuple((o, os.urandom(SHARE_BYTES)) for o in dropped))
    packed = session_unmask(message, True).unmask
    pairs = session_unmask(message, False).unmask
    assert (len(packed.b_shares), len(packed.s_shares)) == (0, 0)
    taken = unmask_from_pb(7, packed, SID)
    assert taken == unmask_from_pb(7, pairs, SID) == message
    assert isinstance(taken.b_shares, OwnerShares) == bool(alive or dropped)


def _violation(convert: object) -> Violation:
    with pytest.raises(ProtocolViolation) as info:
        convert()  # type: ignore[operator]
    return info.value.reason


def test_malformed_packed_messages_are_protocol_violations() -> None:
    shares = ShareKeysResponse(SID, 7, (EncryptedShare(7, 2, bytes(SHARE_CIPHERTEXT_BYTES)),),
                               bytes(32))
    both = session_shares(shares, True).shares
    both.shares.add(src=7, dst=3, ciphertext=bytes(SHARE_CIPHERTEXT_BYTES))
    assert _violation(lambda: shares_from_pb(7, both, SID)) == Violation.MALFORMED
    cut = session_shares(shares, True).shares
    cut.ciphertexts = cut.ciphertexts[:-1]
    assert _violation(lambda: shares_from_pb(7, cut, SID)) == Violation.WRONG_LENGTH

    unmask = UnmaskResponse(SID, 7, ((2, bytes(SHARE_BYTES)),), ((3, bytes(SHARE_BYTES)),))
    both_unmask = session_unmask(unmask, True).unmask
    both_unmask.s_shares.add(owner=4, share=bytes(SHARE_BYTES))
    assert _violation(lambda: unmask_from_pb(7, both_unmask, SID)) == Violation.MALFORMED
    long = session_unmask(unmask, True).unmask
    long.s_values += b"\x00"
    assert _violation(lambda: unmask_from_pb(7, long, SID)) == Violation.WRONG_LENGTH
