"""A cut prefix's own escapes (``Decoded.shown_cut``: an item's backslash doubled, its ``⟨``
written ``\\u27e8``) take a combining mark after them escaped, as the escapes ``printable``
writes do (13a7063). Before, the mark stayed raw in a cut row and drew on the escape's last
character: ``⟨́x`` cut showed ``\\u27e8́x…``, an escape holding an accented 8, and ``a\\́b``
showed its acute over the doubled backslash, where its whole row escapes it."""

from __future__ import annotations

import pytest

from fedhh.codec.codec import Decoded
from fedhh.codec.shown import printable


def _cut(text: str) -> str:
    return printable(Decoded(text, ended=False, possible=True, trailing_bits=0).shown_cut,
                     cut=True)


@pytest.mark.parametrize(("item", "shown"), [
    ("\u27e8\u0301x", "\\u27e8\\u0301x\u2026"),
    ("a\\\u0301b", "a\\\\\\u0301b\u2026"),
    ("a\\\u20dd", "a\\\\\\u20dd\u2026"),  # (an enclosing mark)
    ("\\\\\u27e8\u0308", "\\\\\\\\\\u27e8\\u0308\u2026"),
])
def test_a_mark_after_a_cut_prefixs_own_escape_is_escaped(item: str, shown: str) -> None:
    assert _cut(item) == shown


def test_the_cut_row_shows_the_mark_as_the_whole_row_does() -> None:
    item = "a\\\u0301b"
    assert printable(item) == "a\\\\\\u0301b"
    assert _cut(item) == printable(item) + "\u2026"


@pytest.mark.parametrize("item", ["\u0915\u094d\u0937", "\\u0301", "a\\\\u27e8x", "\u00e9\\"])
def test_marks_on_characters_shown_as_they_are_stay_in_a_cut_prefix(item: str) -> None:
    """Devanagari's virama, and text that only looks like an escape, are shown as before."""
    assert _cut(item) == item.replace("\\", "\\\\") + "\u2026"
