"""A released result's header alone costs its reader nothing: the sum's buffer grows with the
bytes that arrive (outside probe, thirty-sixth stop). Before, ``ResultBuffer`` allocated and
zeroed the header's whole length as the header arrived, so an aggregation service whose header
declared a dimension of 2^32 - 1 (32-bit sums: 16 GiB) made the coordinator (or a combiner
reading a worker) take that much memory before a byte of the sum came, and the round's
charge had been recorded already."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator

import numpy as np
import pytest

from fedhh.rpc.control_client import AggregatorError, read_result_stream
from fedhh.v1 import aggregator_pb2 as pb

DECLARED = 1 << 24  # 64 MiB of 32-bit sums declared; the test sends a few bytes of them


def header(dimension: int) -> pb.ResultChunk:
    return pb.ResultChunk(header=pb.ResultHeader(
        state=pb.AGGREGATION_STATE_RELEASED, dimension=dimension, modulus_bits=32,
        total_bytes=dimension * 4, num_contributors=3))


async def stream(*chunks: pb.ResultChunk) -> AsyncIterator[pb.ResultChunk]:
    for chunk in chunks:
        yield chunk


async def no_hook(header: pb.ResultHeader, evidence: object) -> None:
    return None


def test_a_header_alone_allocates_nothing_of_its_declared_length() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(AggregatorError, match="the result stream ended early"):
            asyncio.run(read_result_stream(
                stream(header(DECLARED), pb.ResultChunk(data=b"\x01\x00\x00\x00")),
                sharded=False, on_evidence=no_hook))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < DECLARED * 4 // 16, peak  # a sixteenth of the declared sum, at the most


def test_a_sum_sent_in_parts_still_reads_back_and_nothing_beyond_it_is_taken() -> None:
    values = np.arange(1000, dtype="<u4")
    data = values.tobytes()
    parts = [pb.ResultChunk(data=data[i:i + 999]) for i in range(0, len(data), 999)]
    _, _, total = asyncio.run(read_result_stream(stream(header(1000), *parts),
                                                 sharded=False, on_evidence=no_hook))
    assert np.array_equal(total, values)
    with pytest.raises(AggregatorError, match="holds more than the declared sum"):
        asyncio.run(read_result_stream(
            stream(header(1000), *parts, pb.ResultChunk(data=b"\x00")),
            sharded=False, on_evidence=no_hook))
