"""A row that stands for several cut prefixes (they show the same text) sums their estimates;
its standard deviation is the sum's, whose noises add (``estimate_std(..., parts)``), not one
element's at the summed count, which understated it by up to sqrt(parts)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.server.mechanisms import LocalRandomizer, estimate_std
from fedhh.server.prefixtree import Found, shown_items


@pytest.mark.parametrize("eps", [0.5, 2.0, 8.0])
def test_a_sums_std_is_the_root_of_its_parts_variances(eps: float) -> None:
    mechanism = LocalRandomizer(eps)
    rng = np.random.default_rng(36)
    n = 5000
    for parts in (1, 2, 3, 7):
        counts = rng.integers(0, n // parts, parts).astype(float)
        each = sum(estimate_std(mechanism, c, n) ** 2 for c in counts)
        assert estimate_std(mechanism, float(counts.sum()), n, parts) == pytest.approx(
            math.sqrt(each), rel=1e-12)
    # (the understatement fixed: three parts of 100 against one element at 300)
    assert estimate_std(mechanism, 300.0, n, 3) > estimate_std(mechanism, 300.0, n)


def test_a_merged_row_counts_its_parts() -> None:
    codec = Codec.from_spec("unicode", 64)
    code = codec.encode("ab")
    length = int(codec.encode_many(["ab"]).lengths[0])
    body = length - len(codec.book.end)  # "ab" without its end symbol
    stem = code >> (64 - body)
    found = []
    for tail in range(4):  # four 2-bit tails inside the next codeword: "ab⟨+2 bits⟩…" each
        bits = body + 2
        prefix = (stem << 2) | tail
        if codec.possible(prefix, bits) and not codec.decode(prefix, bits).partial:
            found.append(Found(prefix << (64 - bits), 10.0 + tail, 5, bits))
    rows = shown_items(codec, found, latest_first=True)
    texts = {row.item for row in rows}
    assert len(rows) == len(texts)  # (one row per shown text)
    merged = [row for row in rows if row.note]
    assert len(found) >= 2 and len(merged) == 1 and merged[0].item == "ab⟨+2 bits⟩…"
    assert all(row.parts == int(row.note.split(" ", 1)[0]) for row in merged)
    assert sum(row.parts for row in rows) == len(found)
    assert all(row.parts == 1 for row in rows if not row.note)


def test_a_merged_row_is_placed_by_its_sum() -> None:
    """Two cut prefixes of one text, 10 and 8, are one row of 18 listed before a row of 15
    in its round (before, after it: the row took its first part's place)."""
    codec = Codec.from_spec("unicode", 64)
    code = codec.encode("ab")
    body = int(codec.encode_many(["ab"]).lengths[0]) - len(codec.book.end)
    stem = code >> (64 - body)
    tails = [t for t in range(4) if codec.possible((stem << 2) | t, body + 2)
             and codec.display((stem << 2) | t, body + 2) == "ab⟨+2 bits⟩…"]
    other = codec.encode("zz")
    found = [Found(((stem << 2) | tails[0]) << (62 - body), 10.0, 5, body + 2),
             Found(((stem << 2) | tails[1]) << (62 - body), 8.0, 5, body + 2),
             Found(other >> 20 << 20, 15.0, 5, 44)]
    for latest_first in (False, True):
        rows = shown_items(codec, found, latest_first=latest_first)
        assert [row.estimate for row in rows] == [18.0, 15.0]
        assert rows[0].item == "ab⟨+2 bits⟩…" and rows[0].parts == 2
