"""Item codecs: lossless for any Unicode string, the old codes kept bit for bit on a-z words,
exact decoding (no bit dropped or swallowed), truncation shown, codebooks as JSON."""

from __future__ import annotations

import itertools
import json
import string
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec import (
    BUILTIN_NAMES,
    DEFAULT_CODEBOOK,
    Codebook,
    Codec,
    codebook_from_spec,
    codec_spec,
    train_codebook,
)
from fedhh.codec import codes as cw
from fedhh.codec.codebook import CONTINUATION_BYTES, MAX_CODEWORD_BITS, builtin_codebook
from fedhh.data.codebooks import TRAINED, book_path, train_builtin
from fedhh.errors import ConfigError

# The letter code of earlier versions (fedhh/codec.py before codebooks), symbol by symbol; the
# unknown symbol is now the escape.
OLD_HUFFMAN = {
    "a": "1010", "b": "1101111", "c": "00001", "d": "10111", "e": "010", "f": "110100",
    "g": "100111", "h": "0010", "i": "0111", "j": "1001001011", "k": "1001000", "l": "10110",
    "m": "110110", "n": "0110", "o": "1000", "p": "100101", "q": "1001001001", "r": "0001",
    "s": "0011", "t": "1100", "u": "00000", "v": "1101110", "w": "110101", "x": "1001001010",
    "y": "100110", "z": "1001001000", "$end": "111", "$unk": "10010011",
}  # fmt: skip
OLD_5BIT = {**{c: format(i, "05b") for i, c in enumerate(string.ascii_lowercase)},
            "$end": format(26, "05b"), "$unk": format(27, "05b")}

az_words = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=14)
WIDE = 1024


def old_bits(table: dict[str, str], word: str) -> str:
    return "".join(table[c] for c in word) + table["$end"]


def expected_code(book: Codebook, item: str, max_bits: int) -> int:
    bits = book.item_bits(item)[:max_bits].ljust(max_bits, "0")
    return int(bits, 2)


@pytest.mark.parametrize(("name", "table"), [("huffman", OLD_HUFFMAN), ("5bit", OLD_5BIT)])
def test_old_codes_are_kept_as_named_codebooks(name: str, table: dict[str, str]) -> None:
    book = builtin_codebook(name)
    assert {chr(b): c for b, c in book.bytes.items()} == {c: table[c]
                                                          for c in string.ascii_lowercase}
    assert (book.end, book.escape) == (table["$end"], table["$unk"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(word=az_words)
def test_a_to_z_words_have_their_old_bits(word: str) -> None:
    for name, table in (("huffman", OLD_HUFFMAN), ("5bit", OLD_5BIT)):
        codec = Codec(name, 60)
        bits = old_bits(table, word)[:60].ljust(60, "0")
        assert codec.encode(word) == int(bits, 2)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(item=st.text(min_size=1, max_size=16))
def test_every_codec_round_trips_any_unicode_string(item: str) -> None:
    for name in BUILTIN_NAMES:
        codec = Codec(name, WIDE)
        code = codec.encode(item)
        length = len(codec.book.item_bits(item))
        decoded = codec.decode(codec.prefix(code, length), length)
        assert (decoded.text, decoded.ended, decoded.possible) == (item, True, True)
        assert codec.display_item(code) == item


@settings(max_examples=200, deadline=None, derandomize=True)
@given(items=st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=20, unique=True))
def test_different_items_never_share_a_code(items: list[str]) -> None:
    for name in BUILTIN_NAMES:
        codes = Codec(name, WIDE).encode_many(items).codes
        assert np.unique(codes).size == len(items)


@pytest.mark.parametrize("max_bits", [1, 7, 60, 63, 64, 65, 127, 128, 129, 256, 300])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(batch=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=25))
def test_vectorized_encoding_equals_the_reference(max_bits: int, batch: list[str]) -> None:
    for name in ("english", "5bit", "bytes"):
        codec = Codec(name, max_bits)
        encoded = codec.encode_many(batch)
        assert encoded.codes.dtype == cw.code_dtype(max_bits)
        for item, code, length, cut in zip(batch, cw.to_ints(encoded.codes), encoded.lengths,
                                           encoded.truncated, strict=True):
            full = len(codec.book.item_bits(item))
            assert code == expected_code(codec.book, item, max_bits)
            assert bool(cut) == (full > max_bits) and int(length) == min(full, max_bits)


def english_raw() -> Codebook:
    """``english`` with continuation bytes written raw (no tokens, so one writing per item)."""
    book = builtin_codebook("english")
    return Codebook("english-raw", book.end, book.escape,
                    {b: c for b, c in book.bytes.items() if b not in CONTINUATION_BYTES},
                    raw_continuations=True)


@pytest.mark.parametrize("raw", [False, True], ids=["bytes", "raw continuations"])
@settings(max_examples=200, deadline=None, derandomize=True)
@given(item=st.text(alphabet="aé€𝄞b.-", min_size=1, max_size=12), data=st.data())
def test_a_prefix_decodes_to_its_whole_characters_and_counts_the_rest(raw: bool, item: str,
                                                                      data) -> None:
    """No bit dropped or swallowed: the text is the longest run of whole characters whose bits
    fit, and the trailing bits are exactly the rest."""
    codec = Codec(english_raw() if raw else "english", WIDE)
    bits = codec.book.item_bits(item)
    cut = data.draw(st.integers(min_value=0, max_value=len(bits) - 1))
    decoded = codec.decode(int(bits[:cut], 2) if cut else 0, cut)
    whole = ""
    used = 0
    for ch in item:
        size = len("".join(codec.book.byte_bits(b) for b in ch.encode("utf-8")))
        if used + size > cut:
            break
        whole, used = whole + ch, used + size
    assert (decoded.text, decoded.trailing_bits, decoded.ended) == (whole, cut - used, False)
    assert decoded.possible
    # Shown cut (issue 27): the whole characters, the whole bytes of the character the prefix
    # stops inside as \xNN, then …; with no whole byte at all, the bits.
    partial, spent = b"", used
    if len(whole) < len(item):
        for byte in item[len(whole)].encode("utf-8"):
            spent += len(codec.book.byte_bits(byte))
            if spent > cut:
                break
            partial += bytes([byte])
    assert decoded.partial == partial
    # ...and the bits it holds of the codeword it stops inside, counted: ab and 3 bits that
    # are not c's read as the parent of abc… when shown ab….
    opened = cut - spent + (len(codec.book.byte_bits(item.encode("utf-8")[
        len(whole.encode("utf-8")) + len(partial)])) if spent > cut else 0)
    assert decoded.open_bits == opened
    marker = "" if not opened else f"⟨+{opened} bit{'s' if opened > 1 else ''}⟩"
    shown = whole + "".join(f"\\x{b:02x}" for b in partial) + marker + "…"
    if not whole and not partial:
        shown = f"⟨{bits[:cut]}⟩…"
    assert codec.display(int(bits[:cut], 2) if cut else 0, cut) == shown


@settings(max_examples=200, deadline=None, derandomize=True)
@given(char=st.characters(min_codepoint=0x80, exclude_categories=("Cs",)))
def test_raw_continuations_cost_the_first_byte_and_six_bits_each(char: str) -> None:
    """In ``unicode`` a character is a token or its first byte's codeword and 6 bits per
    continuation byte, whichever is shorter, and decodes back."""
    book = builtin_codebook(DEFAULT_CODEBOOK)
    data = char.encode("utf-8")
    written = len(book.bytes[data[0]]) + 6 * (len(data) - 1)
    token = book.tokens.get(data)
    assert len(book.item_bits(char)) == min(written, len(token) if token else written) \
        + len(book.end)
    codec = Codec(book, WIDE)
    assert codec.display_item(codec.encode(char)) == char


def test_a_script_the_training_never_saw_costs_its_payload_not_three_codewords() -> None:
    """Hangul is not in the training sample: a syllable cost ~47 bits in ``general`` (three
    byte codewords near the floor share) and costs its first byte's codeword and 12 bits in
    ``unicode``."""
    word = "안녕하세요"
    unicode, general = (len(builtin_codebook(n).item_bits(word)) for n in ("unicode", "general"))
    assert unicode <= 30 * len(word) < 0.65 * general


def test_the_issues_example_decodes_every_bit() -> None:
    codec = Codec("5bit", 60)
    bits = "00000" + "00001" + "11111" + "00010" + "00011" + "11010"
    decoded = codec.decode(int(bits.ljust(60, "0"), 2), 60)
    assert decoded.text == "ab⟨11111⟩cd" and decoded.ended
    assert not decoded.possible and "unused codeword 11111 at bit 10" in decoded.problem
    assert codec.display_item(int(bits.ljust(60, "0"), 2)) == "ab⟨11111⟩cd"


@pytest.mark.parametrize(("bits", "text", "problem"), [
    ("00000" + "11010" + "00001", "a⟨00001⟩", "nonzero bits after the end symbol"),
    ("11011" + "01100001" + "11010", "⟨1101101100001⟩", "escape of byte 0x61"),
    ("11011" + "10000000" + "11010", "⟨0x80⟩", "not UTF-8"),
    ("11010", "", "empty item"),
    ("11100", "⟨11100⟩", "unused codeword"),
])
def test_impossible_bits_are_shown_and_explained(bits: str, text: str, problem: str) -> None:
    codec = Codec("5bit", len(bits))
    decoded = codec.decode(int(bits, 2), len(bits))
    assert decoded.text == text and not decoded.possible and problem in decoded.problem


def test_a_truncated_item_is_shown_as_a_prefix() -> None:
    codec = Codec("english", 60)
    url = "https://example.com/a/very/long/path"
    encoded = codec.encode_many([url, "abc"])
    assert encoded.truncated.tolist() == [True, False]
    shown = codec.display_item(cw.to_ints(encoded.codes)[0])
    text, _, marker = shown.partition("⟨+")  # (the bits of a codeword it stops inside)
    assert shown.endswith("…") and url.startswith(text.removesuffix("…")) and len(text) > 3
    assert marker == "" or marker.endswith(("bit⟩…", "bits⟩…"))
    assert codec.display_item(cw.to_ints(encoded.codes)[1]) == "abc"
    wide = Codec("english", 512)
    assert wide.display_item(wide.encode(url)) == url


def test_codes_wider_than_64_bits_keep_the_prefix_arithmetic() -> None:
    codec = Codec("bytes", 256)
    code = codec.encode("é€𝄞 and more")
    bits = codec.book.item_bits("é€𝄞 and more").ljust(256, "0")[:256]
    for length in (0, 1, 63, 64, 65, 200, 256):
        assert codec.prefix(code, length) == (int(bits[:length], 2) if length else 0)


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_codebooks_are_prefix_free_and_round_trip_through_json(name: str) -> None:
    book = builtin_codebook(name)
    words = sorted(book.codewords())
    assert all(not b.startswith(a) for a, b in itertools.pairwise(words))
    assert Codebook.from_json(book.to_json()) == book
    assert book.spec == name and codebook_from_spec(name) == book
    assert max(len(w) for w in words) <= MAX_CODEWORD_BITS


@pytest.mark.parametrize("name", TRAINED)
def test_shipped_trained_codebooks_are_what_training_gives(name: str) -> None:
    assert train_builtin(name) == builtin_codebook(name)
    assert book_path(name).read_text(encoding="utf-8") == train_builtin(name).to_json()


def test_the_default_codebook_costs_about_the_letter_code_on_english_words() -> None:
    from fedhh.data.wordlists import wordfreq_frequencies

    words, freqs = wordfreq_frequencies("en")
    keep = [i for i, w in enumerate(words[:20000]) if w.isascii() and w.isalpha()
            and w.islower()]
    sample = [words[i] for i in keep]
    weights = freqs[keep]

    def mean_bits(name: str) -> float:
        lengths = Codec(name, WIDE).encode_many(sample).lengths
        return float(np.average(lengths, weights=weights))

    assert mean_bits("english") <= 1.03 * mean_bits("huffman")


def test_a_trained_codebook_is_shipped_inline_and_rebuilt_exactly(tmp_path: Path) -> None:
    domains = [("example.com", 5.0), ("wikipedia.org", 3.0), ("bücher.de", 1.0)]
    book = train_codebook(domains, "domains", description="three domains")
    assert book.escape is not None and ord("x") in book.bytes  # printable ASCII always coded
    spec = book.spec
    assert spec.startswith("{") and json.loads(spec)["name"] == "domains"
    assert Codec.from_spec(spec, 80) == Codec(book, 80)
    assert Codec(book, 80).key.startswith("domains-")
    path = tmp_path / "domains.json"
    path.write_text(book.to_json(), encoding="utf-8")
    assert codec_spec(str(path)) == spec and codec_spec("english") == "english"
    codec = Codec(book, 200)
    for item, _ in domains:
        assert codec.display_item(codec.encode(item)) == item


@pytest.mark.parametrize(("change", "message"), [
    ({"end": "0", "escape": "01"}, "not prefix-free"),
    ({"end": "2"}, "codeword of end"),
    ({"end": "0" * 49}, "codeword of end"),
    ({"escape": None}, "no escape"),
    ({"format": "other"}, "not a fedhh-codebook"),
    ({"extra": 1}, "unknown codebook keys extra"),
    ({"name": "has space"}, "codebook name"),
    ({"bytes": {"a": "10", "0x61": "11"}}, "byte a has two codewords"),
    ({"bytes": {"ab": "10"}}, "byte key 'ab'"),
    ({"raw_continuations": "yes"}, "must be true or false"),
    ({"raw_continuations": True, "bytes": {"a": "10", "0x80": "11"}},
     "writes continuation bytes raw and also gives codewords to 0x80"),
    ({"raw_continuations": True, "escape": None}, "codewords for 2 of 192 bytes and no escape"),
])
def test_bad_codebooks_are_refused_with_the_reason(change: dict, message: str) -> None:
    data = {"format": "fedhh-codebook", "version": 1, "name": "toy", "description": "",
            "end": "00", "escape": "01", "bytes": {"a": "10", "b": "11"}}
    data.update(change)
    with pytest.raises(ConfigError, match=message):
        Codebook.from_json(json.dumps(data))


@pytest.mark.parametrize(("spec", "bits"), [("morse", 60), ("english", 0), ("english", 4097),
                                            ("", 60), ("{not json", 60)])
def test_bad_codec_parameters(spec: str, bits: int) -> None:
    with pytest.raises(ConfigError):
        Codec(spec, bits)


def test_empty_and_invalid_items_are_refused() -> None:
    codec = Codec()
    with pytest.raises(ConfigError, match="item 1 is empty"):
        codec.encode_many(["a", ""])
    with pytest.raises(ConfigError, match="not valid Unicode"):
        codec.encode_many(["a", "\ud800"])
    with pytest.raises(ConfigError, match=r"codebook file /nonexistent/book\.json does not exist"):
        codec_spec("/nonexistent/book.json")
