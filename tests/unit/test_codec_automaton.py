"""The automaton of possible prefixes against a direct reference: parse the bits with the code
tree (and, in a book with raw continuations, six bits per continuation byte) and ask whether
some completion is the code of a non-empty, valid Unicode string."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec import BUILTIN_NAMES, Codec
from fedhh.codec import codes as cw
from fedhh.codec.automaton import DEAD
from fedhh.codec.codebook import Codebook

# Tails that complete any viable UTF-8 prefix: only the first continuation byte has a
# restricted range (RFC 3629), so try each, then plain continuation bytes.
TAILS = [b""] + [bytes([n]) + b"\x80" * k for n in range(0x80, 0xC0) for k in range(3)]


def viable(data: bytes) -> bool:
    """Does some valid UTF-8 string start with ``data``?"""
    for tail in TAILS:
        try:
            (data + tail).decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


def complete(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return bool(data)
    except UnicodeDecodeError:
        return False


def reference_possible(book: Codebook, bits: str) -> bool:
    symbols = {code: ("end", None) for code in [book.end]}
    if book.escape is not None:
        symbols[book.escape] = ("escape", None)
    symbols.update({code: ("bytes", bytes([b])) for b, code in book.bytes.items()})
    symbols.update({code: ("bytes", token) for token, code in book.tokens.items()})
    data = b""
    pos = 0
    while pos < len(bits):
        if book.raw_continuations and not complete(data) and data:
            # Inside a character: its next continuation byte is six raw bits.
            payload = bits[pos : pos + 6]
            pos += 6
            if len(payload) < 6:
                return any(viable(data + bytes([0x80 | v])) for v in range(64)
                           if format(v, "06b").startswith(payload))
            data += bytes([0x80 | int(payload, 2)])
            if not viable(data):
                return False
            continue
        token = ""
        while pos < len(bits) and token not in symbols:
            token += bits[pos]
            pos += 1
            if not any(code.startswith(token) for code in symbols):
                return False  # an unused codeword
        if token not in symbols:  # the bits stop inside a codeword: try every completion
            return any(_completes(book, data, kind, value, "")
                       for code, (kind, value) in symbols.items() if code.startswith(token))
        kind, value = symbols[token]
        if kind == "end":
            return complete(data) and "1" not in bits[pos:]
        if kind == "escape":
            payload = bits[pos : pos + 8]
            pos += 8
            if len(payload) < 8:
                return _completes(book, data, "escape", None, payload)
            value = int(payload, 2)
            if value in book.bytes:
                return False
            value = bytes([value])
        data += value
        if not viable(data):
            return False
    return viable(data)


def _completes(book: Codebook, data: bytes, kind: str, value: bytes | None, known: str) -> bool:
    if kind == "end":
        return complete(data)
    if kind == "bytes":
        return viable(data + value)  # type: ignore[operator]
    return any(viable(data + bytes([b])) for b in range(256)
               if b not in book.bytes and format(b, "08b").startswith(known))


@pytest.mark.parametrize("name", BUILTIN_NAMES)
@settings(max_examples=150, deadline=None, derandomize=True)
@given(bits=st.text(alphabet="01", min_size=1, max_size=36))
def test_random_bits(name: str, bits: str) -> None:
    codec = Codec(name, 64)
    assert codec.possible(int(bits, 2), len(bits)) == reference_possible(codec.book, bits)


@pytest.mark.parametrize("name", BUILTIN_NAMES)
@settings(max_examples=150, deadline=None, derandomize=True)
@given(item=st.text(min_size=1, max_size=6), data=st.data())
def test_prefixes_of_real_codes_and_one_bit_away(name: str, item: str, data) -> None:
    codec = Codec(name, 256)
    bits = codec.book.item_bits(item)
    cut = data.draw(st.integers(1, len(bits)))
    prefix = bits[:cut]
    assert codec.possible(int(prefix, 2), cut)
    flip = data.draw(st.integers(0, cut - 1))
    other = prefix[:flip] + ("1" if prefix[flip] == "0" else "0") + prefix[flip + 1 :]
    assert codec.possible(int(other, 2), cut) == reference_possible(codec.book, other)


@pytest.mark.parametrize("name", ["5bit", "english"])
def test_domain_states_are_the_states_of_each_element(name: str) -> None:
    codec = Codec(name, 64)
    auto = codec.automaton
    prefixes = cw.from_ints([0, 5, 17, 30, 31], 5)
    states = auto.domain_states(auto.run(prefixes, 5), 7)
    elements = cw.append(np.repeat(prefixes, 128), 5, np.tile(np.arange(128), 5), 7)
    assert np.array_equal(states, auto.run(elements, 12))
    dead = [not codec.possible(v, 12) for v in cw.to_ints(elements)]
    assert np.array_equal(states == DEAD, np.array(dead))
