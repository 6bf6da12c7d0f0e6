"""A cut prefix as the consoles and the dashboard show it (``printable(..., cut=True)`` of
``Decoded.shown_cut``) reads back to the bytes it stands for: ``\\xNN`` there is a byte of a
character it stops inside, so a character of its text escaped below U+0100 is written
``\\u00NN``. Before, the text ``οοÃ`` (its Latin ``Ã`` escaped as the odd script out) and
``οο`` cut inside a character whose first byte is c3 both showed ``οο\\xc3…``."""

from __future__ import annotations

import random
import re

import pytest

from fedhh.codec.codec import Decoded
from fedhh.codec.shown import printable, printable_rows

_MARKER = re.compile(r"⟨\+([0-9]+) bits?⟩$")
_ESCAPE = re.compile(r"\\\\|\\x([0-9a-f]{2})|\\u([0-9a-f]{4})|\\U([0-9a-f]{8})")
# Latin-1 letters (first bytes of two-byte characters among them), Greek and Cyrillic letters
# that make them the odd script out, C1 controls, the no-break space, ASCII and a backslash.
ALPHABET = "aoÃÂðôçé\u03bf\u03b1\u0430\u043e\x85\x9f\xa0\x1b \\x3c"
PARTIALS = (b"", b"", b"\xc3", b"\xe2\x80", b"\xf0\x9f", b"\xf0\x9f\x98")


def _cut(text: str, partial: bytes = b"", bits: int = 0) -> str:
    return printable(Decoded(text, False, True, 0, partial=partial, open_bits=bits).shown_cut,
                     cut=True)


def _read_back(shown: str) -> tuple[bytes, int]:
    """The bytes a shown cut prefix stands for, and the bits of a codeword after them."""
    assert shown.endswith("…")
    shown = shown[:-1]
    marker = _MARKER.search(shown)
    bits = int(marker.group(1)) if marker else 0
    shown = shown[:marker.start()] if marker else shown
    out, at = bytearray(), 0
    for m in _ESCAPE.finditer(shown):
        out += shown[at:m.start()].encode()
        if m.group(0) == "\\\\":
            out += b"\\"
        elif m.group(1):
            out.append(int(m.group(1), 16))
        else:
            out += chr(int(m.group(2) or m.group(3), 16)).encode()
        at = m.end()
    return bytes(out + shown[at:].encode()), bits


@pytest.mark.parametrize(("text", "partial", "shown"), [
    ("\u03bf\u03bf\u00c3", b"", "\u03bf\u03bf\\u00c3…"),
    ("\u03bf\u03bf", b"\xc3", "\u03bf\u03bf\\xc3…"),
    ("\u03bf\u03bf\u00f0\x9f", b"", "\u03bf\u03bf\\u00f0\\u009f…"),
    ("\u03bf\u03bf", b"\xf0\x9f", "\u03bf\u03bf\\xf0\\x9f…"),
    ("a\xa0b", b"", "a\\u00a0b…"),
    ("a\x1b", b"\xc3", "a\\x1b\\xc3…"),  # (an ASCII character is its byte: \x1b either way)
])
def test_a_cut_prefixs_own_characters_read_apart_from_its_bytes(text: str, partial: bytes,
                                                                 shown: str) -> None:
    assert _cut(text, partial) == shown
    assert _read_back(shown) == ((text.encode() + partial), 0)


def test_a_list_of_both_shows_them_apart() -> None:
    rows = [(Decoded("\u03bf\u03bf\u00c3", False, True, 0).shown_cut, True),
            (Decoded("\u03bf\u03bf", False, True, 0, partial=b"\xc3").shown_cut, True)]
    first, second = printable_rows(rows)
    assert first != second


def test_every_cut_prefix_shown_reads_back_to_its_bytes() -> None:
    """5,000 seeded prefixes of 0 to 4 characters, a partial character and bits after them."""
    rng = random.Random(54)
    for _ in range(5_000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 4)))
        partial, bits = rng.choice(PARTIALS), rng.choice((0, 0, 1, 3))
        if not text and not partial:
            continue
        shown = _cut(text, partial, bits)
        assert _read_back(shown) == (text.encode() + partial, bits), (ascii(text), partial)
