"""SecureSource: a keystream of any request size, whatever the sizes before it, and no buffer of
a report's size held per source (a load test's fleet keeps tens of thousands of them)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from fedhh.device import SecureSource

WORDS = 4096  # a report at D = 4096: 16 KiB of keystream


def test_requests_of_any_size_in_any_order() -> None:
    source = SecureSource()
    draws = [source.uint32(size) for size in (3, 5000, 1, 0, 70_000, 17)]
    assert [d.size for d in draws] == [3, 5000, 1, 0, 70_000, 17]
    assert all(d.dtype == np.uint32 for d in draws)
    # a keystream does not repeat: the 70,000 words share no 8-word window with the 5,000
    long_draw = draws[4]
    windows = {long_draw[i:i + 8].tobytes() for i in range(0, long_draw.size - 8)}
    assert all(draws[1][i:i + 8].tobytes() not in windows for i in range(0, 5000 - 8, 97))


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
