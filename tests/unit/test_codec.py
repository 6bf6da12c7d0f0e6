"""Item codecs: round trips, prefix-freeness, truncation, vectorized = scalar, prefix arithmetic."""

from __future__ import annotations

import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec import ALPHABET, END_ID, SYMBOLS, UNK_ID, Codec
from fedhh.errors import ConfigError

CODECS = [Codec("huffman"), Codec("5bit")]
words = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=12)
any_words = st.text(min_size=1, max_size=20).filter(lambda w: not any(c.isspace() for c in w))


def reference_bits(codec: Codec, word: str) -> str:
    """The code as a bit string, written the slow obvious way."""
    out = []
    for ch in word:
        c = ch.lower() if "A" <= ch <= "Z" else ch
        s = ALPHABET.index(c) if c in ALPHABET else UNK_ID
        out.append(format(codec.book.values[s], f"0{codec.book.lengths[s]}b"))
    out.append(format(codec.book.values[END_ID], f"0{codec.book.lengths[END_ID]}b"))
    return "".join(out)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_codebook_is_prefix_free_and_complete(codec: Codec) -> None:
    book = [format(v, f"0{n}b") for v, n in zip(codec.book.values, codec.book.lengths, strict=True)]
    assert len(set(book)) == len(SYMBOLS)
    for a in book:
        for b in book:
            assert a == b or not b.startswith(a)
    if codec.name == "huffman":
        assert sum(2.0 ** -len(b) for b in book) == pytest.approx(1.0)


def test_huffman_gives_frequent_letters_short_codes() -> None:
    book = Codec("huffman").book
    assert book.lengths[ALPHABET.index("e")] <= book.lengths[ALPHABET.index("z")]
    assert book.lengths[ALPHABET.index("e")] == 3


@settings(max_examples=300, deadline=None, derandomize=True)
@given(word=words)
def test_round_trip(word: str) -> None:
    for codec in CODECS:
        code = codec.encode(word)
        bits = reference_bits(codec, word)
        if len(bits) <= codec.max_bits:
            decoded = codec.decode(codec.prefix(code, len(bits)), len(bits))
            assert decoded.text == word and decoded.ended and decoded.padding_ok
            assert codec.display_item(code) == word
        else:
            assert codec.display_item(code) == word[: len(codec.display_item(code))]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(batch=st.lists(any_words, min_size=1, max_size=30))
def test_vectorized_encoding_equals_reference(batch: list[str]) -> None:
    for codec in CODECS:
        encoded = codec.encode_many(batch)
        for word, code, length, cut in zip(batch, encoded.codes, encoded.lengths,
                                           encoded.truncated, strict=True):
            bits = reference_bits(codec, word)
            assert bool(cut) == (len(bits) > codec.max_bits)
            assert int(length) == min(len(bits), codec.max_bits)
            expected = bits[: codec.max_bits].ljust(codec.max_bits, "0")
            assert format(int(code), f"0{codec.max_bits}b") == expected


@settings(max_examples=200, deadline=None, derandomize=True)
@given(word=words, cut=st.integers(min_value=0, max_value=60))
def test_prefix_is_the_leading_bits(word: str, cut: int) -> None:
    codec = CODECS[0]
    code = codec.encode(word)
    full = format(code, "060b")
    assert codec.prefix(code, cut) == (int(full[:cut], 2) if cut else 0)
    vectorized = np.array([code], dtype=np.uint64) >> np.uint64(60 - cut)
    assert int(vectorized[0]) == codec.prefix(code, cut)


def test_truncation_and_unknown_characters() -> None:
    codec = Codec("5bit")
    encoded = codec.encode_many(["abcdefghijklmnop", "Don't", "héllo"])
    assert encoded.truncated.tolist() == [True, False, False]
    assert codec.display_item(int(encoded.codes[0])) == "abcdefghijkl"  # 12 symbols x 5 bits
    assert codec.display_item(int(encoded.codes[1])) == "don?t"
    assert codec.display_item(int(encoded.codes[2])) == "h?llo"
    assert codec.is_finished(codec.prefix(int(encoded.codes[1]), 30), 30)
    assert not codec.is_finished(codec.prefix(int(encoded.codes[1]), 25), 25)


def test_nonzero_padding_after_end_is_flagged() -> None:
    codec = Codec("5bit")
    code = codec.encode("ab")  # 15 bits: a, b, end
    prefix = (codec.prefix(code, 15) << 5) | 0b00001
    decoded = codec.decode(prefix, 20)
    assert decoded.ended and not decoded.padding_ok


def test_partial_prefix_display() -> None:
    codec = Codec("5bit")
    code = codec.encode("hello")
    assert codec.display(codec.prefix(code, 12), 12) == "he…"


@pytest.mark.parametrize("name,bits", [("morse", 60), ("huffman", 0), ("huffman", 64)])
def test_bad_codec_parameters(name: str, bits: int) -> None:
    with pytest.raises(ConfigError):
        Codec(name, bits)
