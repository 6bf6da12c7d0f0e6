"""``masked_vector_header``: a masked vector's signed header read from the first bytes of its
encoding, so the Connect port knows an upload's caller before the upload takes a turn."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.rpc.aggregator_wire import masked_vector_header
from fedhh.secagg import ProtocolViolation
from fedhh.v1 import aggregator_pb2 as pb


def _header(proof_bytes: int) -> pb.MaskedInputHeader:
    header = pb.MaskedInputHeader(session_id=b"s" * 32, total_bytes=1 << 17,
                                  wait_next_ms=2000, vector_sha256=b"h" * 32)
    header.credentials.admission.device_id = 7
    header.credentials.admission.proof = b"p" * proof_bytes
    header.credentials.signature = b"g" * 64
    return header


@settings(max_examples=60, deadline=None)
@given(proof_bytes=st.integers(0, 3000), data_bytes=st.integers(0, 300))
def test_the_header_is_found_exactly_when_its_last_byte_arrives(proof_bytes: int,
                                                                 data_bytes: int) -> None:
    header = _header(proof_bytes)
    encoded = pb.MaskedVector(header=header, data=b"d" * data_bytes).SerializeToString()
    size = header.ByteSize()
    end = len(encoded) - len(pb.MaskedVector(data=b"d" * data_bytes).SerializeToString())
    for cut in range(end):
        assert masked_vector_header(encoded[:cut], 8192) is None, cut
    for cut in (end, len(encoded)):
        assert masked_vector_header(encoded[:cut], 8192) == (header, size)


@pytest.mark.parametrize("prefix, message", [
    (pb.MaskedVector(data=b"d").SerializeToString(), "header must come first"),
    (b"\x12\x01d", "header must come first"),
    (b"\x0a" + b"\xff" * 10, "no varint"),
    (b"\x0a\x81\x40", "at most 8192 bytes, got 8193"),
    (b"\x0a\x02\xff\xff", "does not parse"),
])
def test_a_prefix_that_cannot_be_a_masked_vector_is_refused(prefix: bytes, message: str) -> None:
    with pytest.raises(ProtocolViolation, match=message):
        masked_vector_header(prefix, 8192)


def test_a_header_at_the_bound_is_read() -> None:
    header = _header(200)
    size = header.ByteSize()
    encoded = pb.MaskedVector(header=header).SerializeToString()
    assert masked_vector_header(encoded, size) == (header, size)
    with pytest.raises(ProtocolViolation, match=f"at most {size - 1} bytes, got {size}"):
        masked_vector_header(encoded, size - 1)
