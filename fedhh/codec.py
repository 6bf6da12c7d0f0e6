"""Item codecs: words to bit strings of at most ``max_bits`` bits, and prefixes back to text.

An encoded item is a non-negative integer holding its bits *left-aligned* in ``max_bits`` bits
(zero padded after the end-of-word symbol), so the length-L prefix of an item is
``code >> (max_bits - L)`` and every prefix/segment operation is integer arithmetic, vectorized
over numpy ``uint64`` arrays in the simulator. The end-of-word symbol makes codes prefix-free, so
the left-aligned integer alone identifies an item: two different words can share a code only when
they differ in characters outside the alphabet (mapped to the unknown symbol) or after the first
``max_bits`` bits (truncation).

Two codebooks are provided:

- ``huffman``: a character-level Huffman code built from the English letter frequencies of
  R. Lewand, *Cryptological Mathematics* (MAA, 2000), as tabulated in Wikipedia's "Letter
  frequency" article, plus an end-of-word symbol weighted by the mean English word length
  (4.7 letters, so 100/4.7 per 100 letters) and an unknown-character symbol (weight 0.5).
- ``5bit``: the fixed 5-bit code of the paper's comparisons (a-z, end, unknown: 28 of 32 values).

Uppercase ASCII letters are folded to lowercase; any other character is the unknown symbol.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fedhh.errors import ConfigError

END = "$end"
UNK = "$unk"
UNKNOWN_DISPLAY = "?"
MAX_SUPPORTED_BITS = 63

# Lewand (2000), percent of letters in English text.
LETTER_FREQUENCIES: dict[str, float] = {
    "a": 8.167, "b": 1.492, "c": 2.782, "d": 4.253, "e": 12.702, "f": 2.228, "g": 2.015,
    "h": 6.094, "i": 6.966, "j": 0.153, "k": 0.772, "l": 4.025, "m": 2.406, "n": 6.749,
    "o": 7.507, "p": 1.929, "q": 0.095, "r": 5.987, "s": 6.327, "t": 9.056, "u": 2.758,
    "v": 0.978, "w": 2.360, "x": 0.150, "y": 1.974, "z": 0.074,
}  # fmt: skip
MEAN_WORD_LENGTH = 4.7
UNKNOWN_WEIGHT = 0.5

ALPHABET = tuple(LETTER_FREQUENCIES)  # a..z; symbol id i < 26 is a letter
SYMBOLS = (*ALPHABET, END, UNK)
END_ID = len(ALPHABET)
UNK_ID = END_ID + 1


@dataclass(frozen=True)
class Decoded:
    """A prefix decoded to text.

    ``ended`` is true when the end-of-word symbol was decoded; ``padding_ok`` is false when bits
    after it are not all zero (no honest device can report such a string); ``trailing_bits`` is the
    number of bits after the last whole symbol when the prefix stops inside a codeword.
    """

    text: str
    ended: bool
    padding_ok: bool
    trailing_bits: int


@dataclass(frozen=True)
class Codebook:
    """A prefix-free code over SYMBOLS: codeword value and length per symbol id."""

    name: str
    values: tuple[int, ...]
    lengths: tuple[int, ...]
    _decode: dict[tuple[int, int], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "_decode",
            {(v, n): s for s, (v, n) in enumerate(zip(self.values, self.lengths, strict=True))},
        )

    def lookup(self, value: int, length: int) -> int | None:
        return self._decode.get((value, length))

    @property
    def max_codeword(self) -> int:
        return max(self.lengths)


def huffman_codebook() -> Codebook:
    """Canonical-free Huffman code with deterministic tie-breaking (by insertion order)."""
    weights = [*LETTER_FREQUENCIES.values(), 100.0 / MEAN_WORD_LENGTH, UNKNOWN_WEIGHT]
    counter = itertools.count()
    heap: list[tuple[float, int, tuple[int, ...]]] = [
        (w, next(counter), (s,)) for s, w in enumerate(weights)
    ]
    heapq.heapify(heap)
    codes = [(0, 0)] * len(weights)  # (value, length) per symbol, built bottom up
    while len(heap) > 1:
        w0, _, left = heapq.heappop(heap)
        w1, _, right = heapq.heappop(heap)
        for bit, group in ((0, left), (1, right)):
            for s in group:
                value, length = codes[s]
                codes[s] = (value | (bit << length), length + 1)
        heapq.heappush(heap, (w0 + w1, next(counter), left + right))
    return Codebook("huffman", tuple(v for v, _ in codes), tuple(n for _, n in codes))


def fixed5_codebook() -> Codebook:
    """The 5-bit code: symbol id i is the 5-bit number i."""
    return Codebook("5bit", tuple(range(len(SYMBOLS))), (5,) * len(SYMBOLS))


_CODEBOOKS = {"huffman": huffman_codebook, "5bit": fixed5_codebook}
CODEC_NAMES = tuple(_CODEBOOKS)


@dataclass(frozen=True)
class ItemCodes:
    """Encoded items as arrays: left-aligned codes (uint64) and their bit lengths.

    ``lengths`` counts the bits up to and including the end symbol, or ``max_bits`` when the word
    was truncated (``truncated`` is then true).
    """

    codes: np.ndarray
    lengths: np.ndarray
    truncated: np.ndarray


class Codec:
    """Encodes words as bit strings of at most max_bits bits and decodes prefixes for display."""

    def __init__(self, name: str = "huffman", max_bits: int = 60) -> None:
        if name not in _CODEBOOKS:
            raise ConfigError(f"encoding must be one of {', '.join(CODEC_NAMES)}, got {name!r}")
        if not 1 <= max_bits <= MAX_SUPPORTED_BITS:
            raise ConfigError(f"max_bits must be in [1, {MAX_SUPPORTED_BITS}], got {max_bits}")
        self.name = name
        self.max_bits = max_bits
        self.book = _CODEBOOKS[name]()
        self._values = np.array(self.book.values, dtype=np.uint64)
        self._lengths = np.array(self.book.lengths, dtype=np.int64)

    def __repr__(self) -> str:
        return f"Codec({self.name!r}, max_bits={self.max_bits})"

    # ---- encoding -------------------------------------------------------------------------
    def encode(self, word: str) -> int:
        """The left-aligned code of one word."""
        return int(self.encode_many([word]).codes[0])

    def encode_many(self, words: Sequence[str]) -> ItemCodes:
        """Encode many words at once, vectorized over their characters."""
        r = self.max_bits
        count = len(words)
        if count == 0:
            empty = np.zeros(0, dtype=np.uint64)
            return ItemCodes(empty, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
        word_lengths = np.fromiter((len(w) for w in words), dtype=np.int64, count=count)
        points = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32)
        symbols = _symbol_ids(points)
        # Insert the end symbol after every word: positions shift by the word index.
        ends = np.cumsum(word_lengths) + np.arange(count)
        stream = np.full(points.size + count, END_ID, dtype=np.int64)
        keep = np.ones(stream.size, dtype=bool)
        keep[ends] = False
        stream[keep] = symbols
        bits = self._lengths[stream]
        values = self._values[stream]
        word_of = np.repeat(np.arange(count), word_lengths + 1)
        starts_of_word = np.concatenate(([0], ends[:-1] + 1))
        end_bit = np.cumsum(bits)
        start_bit = end_bit - bits
        word_offset = start_bit[starts_of_word][word_of]
        start = start_bit - word_offset
        stop = start + bits
        shifted = np.zeros(stream.size, dtype=np.uint64)
        whole = stop <= r
        shifted[whole] = values[whole] << (r - stop[whole]).astype(np.uint64)
        cut = (start < r) & ~whole
        shifted[cut] = values[cut] >> (stop[cut] - r).astype(np.uint64)
        codes = np.bitwise_or.reduceat(shifted, starts_of_word)
        total = stop[ends]
        truncated = total > r
        return ItemCodes(codes, np.minimum(total, r), truncated)

    # ---- prefixes -------------------------------------------------------------------------
    def prefix(self, code: int, length: int) -> int:
        """The first ``length`` bits of a left-aligned code, as a ``length``-bit integer."""
        return code >> (self.max_bits - length)

    def decode(self, prefix: int, length: int) -> Decoded:
        """Decode the first ``length`` bits held in ``prefix`` (a length-bit integer)."""
        out: list[str] = []
        value, nbits, pos = 0, 0, 0
        while pos < length:
            value = (value << 1) | ((prefix >> (length - 1 - pos)) & 1)
            nbits += 1
            pos += 1
            symbol = self.book.lookup(value, nbits)
            if symbol is None:
                if nbits > self.book.max_codeword:
                    # Not a codeword (only possible for the 5-bit code's unused values).
                    out.append(UNKNOWN_DISPLAY)
                    value, nbits = 0, 0
                continue
            if symbol == END_ID:
                rest = length - pos
                pad_ok = rest == 0 or (prefix & ((1 << rest) - 1)) == 0
                return Decoded("".join(out), True, pad_ok, 0)
            out.append(ALPHABET[symbol] if symbol < END_ID else UNKNOWN_DISPLAY)
            value, nbits = 0, 0
        return Decoded("".join(out), False, True, nbits)

    def is_finished(self, prefix: int, length: int) -> bool:
        """A prefix is a finished item when it holds the end symbol or all max_bits bits."""
        return length >= self.max_bits or self.decode(prefix, length).ended

    def display(self, prefix: int, length: int) -> str:
        """Text for a prefix; an unfinished one ends in an ellipsis."""
        decoded = self.decode(prefix, length)
        if decoded.ended or length >= self.max_bits:
            return decoded.text
        return decoded.text + "…"

    def display_item(self, code: int) -> str:
        return self.display(code, self.max_bits)


def _symbol_ids(points: np.ndarray) -> np.ndarray:
    """Map Unicode code points to symbol ids: a-z (A-Z folded), everything else unknown."""
    ids = np.full(points.size, UNK_ID, dtype=np.int64)
    lower = (points >= ord("a")) & (points <= ord("z"))
    upper = (points >= ord("A")) & (points <= ord("Z"))
    ids[lower] = points[lower].astype(np.int64) - ord("a")
    ids[upper] = points[upper].astype(np.int64) - ord("A")
    return ids


def codes_of(codec: Codec, words: Iterable[str]) -> np.ndarray:
    """Left-aligned codes of words, as uint64."""
    return codec.encode_many(list(words)).codes
