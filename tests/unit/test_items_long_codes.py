"""Items far longer than the codes: the fast encoder writes only the symbols that reach the
code's width (a vocabulary of 2,000 URLs of 20,000 characters took 2.3 GB and 15 s to encode,
`fedhh simulate` 2.4 GB; 0.17 GB and 5.6 s now), and its codes, lengths and cut flags are the
reference writing's (`Codebook.item_bits`) for every built-in codebook and width."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from fedhh.codec import Codec
from fedhh.codec import codes as cw

BOOKS = ["unicode", "general", "tokens", "english", "german", "bytes", "huffman", "5bit"]
PIECES = [*"abcxyz019%&=?/.:- ", "é", "東", "👍", "🏽", "\u200d", "ß", "https://", ".com/",
          "@gmail.com", "the", "ing", "\U0010ffff"]


def _items(seed: int, sizes: list[int]) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(size)) for size in sizes]


@pytest.mark.parametrize("book", BOOKS)
def test_long_items_are_coded_as_the_reference_writes_them(book: str) -> None:
    items = _items(BOOKS.index(book), [1, 3, 40, 120, 400, 600, 1200, 1200])
    items[-1] = items[-2] + "x"  # (equal but for the end: one code when both are cut)
    reference = [Codec(book, 8).book.item_bits(item) for item in items]
    for width in (8, 64, 65, 200, 828, 1024):
        got = Codec(book, width).encode_many(items)
        for bits, code, length, cut in zip(reference, cw.to_ints(got.codes),
                                           got.lengths.tolist(), got.truncated.tolist(),
                                           strict=True):
            assert code == int(bits[:width].ljust(width, "0"), 2), (book, width)
            assert (length, cut) == (min(len(bits), width), len(bits) > width)


@pytest.mark.parametrize(("book", "count", "limit_mb"), [
    ("english", 100, 8), ("bytes", 100, 8), ("unicode", 8, 4)])
def test_long_items_cost_memory_for_their_codes_not_their_bytes(
        book: str, count: int, limit_mb: int) -> None:
    """Peak allocations while encoding 20,000-character items at 828 bits: before, ~60 bytes
    for each of their bytes (english 100 items: 270 MB; unicode 8: 15 MB)."""
    items = _items(7, [20_000] * count)
    codec = Codec(book, 828)
    tracemalloc.start()
    try:
        got = codec.encode_many(items)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.truncated.all()
    assert peak < limit_mb * 1e6, peak
