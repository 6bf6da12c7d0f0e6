"""SecureSource: its words are its AES-256-CTR keystream, in order, whatever the sizes drawn
before (the zeros it encrypts are shared by every source), and no buffer of a report's size is
held per source (a load test's fleet keeps tens of thousands of them)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedhh.device import SecureSource, randomness

WORDS = 4096  # a report at D = 4096: 16 KiB of keystream


def test_draws_of_any_size_are_the_keystream_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    draws_from_os: Iterator[bytes] = iter((bytes(range(32)), bytes(range(100, 116))))
    monkeypatch.setattr(randomness.os, "urandom", lambda n: next(draws_from_os)[:n])
    source = SecureSource()
    sizes = (3, 5000, 1, 0, 70_000, 17)
    draws = [source.uint32(size) for size in sizes]
    assert [d.size for d in draws] == list(sizes)
    assert all(d.dtype == np.uint32 for d in draws)
    encryptor = Cipher(algorithms.AES(bytes(range(32))),
                       modes.CTR(bytes(range(100, 116)))).encryptor()
    keystream = np.frombuffer(encryptor.update(bytes(4 * sum(sizes))), dtype="<u4")
    assert np.array_equal(np.concatenate(draws), keystream)


def test_sources_hold_no_buffer_of_a_reports_size() -> None:
    SecureSource().uint32(WORDS)  # the shared zeros exist before the measurement
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        sources = [SecureSource() for _ in range(500)]
        reports = [s.uint32(WORDS) for s in sources]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(reports) == len(sources)
    # the reports themselves are 500 x 16 KiB; a buffer per source would double that
    assert held < 500 * WORDS * 4 * 1.5, held
