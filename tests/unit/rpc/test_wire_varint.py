"""The varints the request encoder writes (``aggregator_wire._varint``): protobuf's bytes, in
one call for the lengths a session's events and requests have."""

from __future__ import annotations

import random

import pytest
from call_count_kit import calls
from google.protobuf.internal.encoder import _VarintBytes

from fedhh.rpc.aggregator_wire import _varint

# Each width's first and last value, and some between (seeded).
EDGES = sorted({v for bits in range(0, 64, 7) for v in ((1 << bits) - 1, 1 << bits)}
               | {random.Random(30).randrange(1 << bits) for bits in range(1, 64) for _ in "ab"})


def test_a_varint_is_protobufs() -> None:
    assert [_varint(v) for v in EDGES] == [_VarintBytes(v) for v in EDGES]


@pytest.mark.parametrize("value", [0x80, 17_000, 0x3FFF, 0x4000, 300_000, 0x1FFFFF])
def test_a_length_below_two_mebibytes_is_one_call(value: int) -> None:
    """Before, a value from 128 on was a loop over a bytearray: 4 or 5 calls here."""
    assert calls(lambda: _varint(value)) <= 2  # (the lambda and _varint)
