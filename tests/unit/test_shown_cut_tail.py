"""A cut prefix as the consoles and the dashboard show it (``printable(..., cut=True)``): two
cut prefixes of different text never show alike. Before, a joiner just before the ``…`` was
kept (the ellipsis counted as the character it joins): the prefix of the family emoji 👨‍👩‍👧‍👦
that ends after the man and the joiner showed as ``👨‍…``, which reads ``👨…``, the cut prefix
of every item starting with the man (``👨🏽`` too); a networked run listed it so."""

from __future__ import annotations

import re

import pytest

from fedhh.codec import Codec
from fedhh.codec.shown import printable

ITEMS = ["👨\u200d👩\u200d👧\u200d👦", "👨", "👨🏽", "👨👩", "🏳️\u200d🌈", "🤷\u200d♂️",
         "नमस्ते", "क्\u200dष", "می\u200cخواهم", "a\u200db", "a\\x41", "\\", "東京都",
         "❤️", "1️⃣"]


def shown_prefixes(codec: Codec, item: str) -> dict[str, tuple[str, bytes]]:
    """Every unended prefix of ``item``'s code: as shown, to what it decodes."""
    code, width = codec.encode(item), codec.max_bits
    length = int(codec.encode_many([item]).lengths[0])
    out = {}
    for bits in range(1, length):
        decoded = codec.decode(code >> (width - bits), bits)
        if not decoded.ended and decoded.text + decoded.partial.decode("latin-1"):
            out[printable(decoded.shown_cut, cut=True)] = (decoded.text, decoded.partial)
    return out


def looks(shown: str) -> str:
    """What a terminal draws of a shown text: a raw joiner between two characters joins them
    (a family emoji, a conjunct) and before the tail (a byte's escape, the ellipsis) or at the
    end draws nothing."""
    return re.sub("[\u200c\u200d](?=…|\\\\|$)", "", shown)


@pytest.mark.parametrize("book", ["unicode", "bytes"])
def test_cut_prefixes_of_different_text_never_look_alike(book: str) -> None:
    codec = Codec(book, 512)
    seen: dict[str, tuple[str, bytes]] = {}
    for item in ITEMS:
        for shown, decoded in shown_prefixes(codec, item).items():
            assert seen.setdefault(looks(shown), decoded) == decoded, (shown, decoded)


def test_a_joiner_before_the_tail_is_escaped_and_one_inside_is_not() -> None:
    assert printable("👨\u200d…", cut=True) == "👨\\u200d…"
    assert printable("👨\u200d\\xf0\\x9f…", cut=True) == "👨\\u200d\\xf0\\x9f…"
    assert printable("नम\u200d…", cut=True) == "नम\\u200d…"
    assert printable("👨\u200d👩…", cut=True) == "👨\u200d👩…"  # it joins the woman
    # (an item's own backslash, doubled, is not the start of a byte's escape: the space
    # before it is inside the text, not at its end; a joiner before it joins nothing, so is
    # escaped: test_shown_joiners.py)
    assert printable("a \\\\x41…", cut=True) == "a \\\\x41…"
    assert printable("a \\x41…", cut=True) == "a\\x20\\x41…"
    assert printable("👨\u200d\\\\x41…", cut=True) == "👨\\u200d\\\\x41…"
    assert printable("👨\u200d", cut=False) == "👨\\u200d"  # (as before)
