"""The session stream's open: what the device signs, and that it is good for one stream only."""

from __future__ import annotations

import pytest

from fedhh.rpc.aggregator_wire import (
    CHALLENGE_BYTES,
    CallKind,
    admission_from_pb,
    call_transcript,
    session_open,
    session_transcript,
)
from fedhh.secagg import Admission
from fedhh.secagg.primitives import ed25519_from_seed, ed25519_public_bytes, ed25519_verify

KEY = ed25519_from_seed(b"\x05" * 32)
SESSION = bytes(range(32))
CHALLENGE = bytes(range(100, 100 + CHALLENGE_BYTES))


def _admission(device_id: int = 7) -> Admission:
    return Admission(device_id, ed25519_public_bytes(KEY), b"\x01" * 32, b"\x02" * 32,
                     b"\x03" * 64)


def test_the_transcript_is_label_then_length_prefixed_fields() -> None:
    # Hand-assembled: label, len(session) || session, device id, len(challenge) || challenge.
    expected = (b"fedhh/aggregator/v1/session" + (32).to_bytes(4, "big") + SESSION
                + (7).to_bytes(4, "big") + (32).to_bytes(4, "big") + CHALLENGE)
    assert session_transcript(SESSION, 7, CHALLENGE) == expected


def test_an_open_verifies_for_its_own_challenge_session_and_device_only() -> None:
    opened = session_open(KEY, _admission(), SESSION, CHALLENGE)
    assert admission_from_pb(opened.admission) == _admission()
    public = ed25519_public_bytes(KEY)
    assert ed25519_verify(public, opened.signature, session_transcript(SESSION, 7, CHALLENGE))
    other_challenge = bytes(CHALLENGE_BYTES)
    for transcript in (session_transcript(SESSION, 7, other_challenge),
                       session_transcript(bytes(32), 7, CHALLENGE),
                       session_transcript(SESSION, 8, CHALLENGE)):
        assert not ed25519_verify(public, opened.signature, transcript)


@pytest.mark.parametrize("kind", list(CallKind))
def test_no_call_transcript_is_an_open_transcript(kind: CallKind) -> None:
    """Domain separation: the labels differ and neither is a prefix of the other, so a unary
    call's signature can never open a stream (nor the reverse), whatever the bodies."""
    call = call_transcript(kind, SESSION, 7, CHALLENGE)
    opened = session_transcript(SESSION, 7, CHALLENGE)
    assert not call.startswith(b"fedhh/aggregator/v1/session")
    assert not opened.startswith(b"fedhh/aggregator/v1/call")
    assert call != opened
