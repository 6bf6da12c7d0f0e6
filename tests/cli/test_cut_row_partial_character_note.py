"""A cut row that stops inside a character shows the bytes of it the run found as ``\\xNN``
before its ``⟨+N bits⟩`` or ``…`` (``https://a.example/\\xe2…``, the first of the three bytes
of ``€``), and its ``prefix_bytes`` count them. The lists of `fedhh simulate` and `fedhh up`
said what ``⟨+N bits⟩`` is and left the byte unexplained, to be read as an escape of the
item's own; they now say it is the first bytes of the next character, and how many a
character takes."""

from __future__ import annotations

import pytest

from fedhh.cli.simulate import open_note
from fedhh.codec.shown import cut_bytes, partial_bytes

BYTES = (", \\xNN before the … the first byte of the next character as UTF-8 writes it (2 to 4 "
         "bytes past ASCII), not enough to tell which; the row's bytes count them")


@pytest.mark.parametrize(("shown", "partial", "whole"), [
    ("https://a.example/\\xe2…", 1, 18),
    ("東\\xe4\\xba⟨+3 bits⟩…", 2, 3),
    ("ab⟨+2 bits⟩…", 0, 2),
    ("a\\\\xe2…", 0, 5),  # (the item's own backslash, doubled, then "xe2": no byte)
    ("a\\\\\\xe2…", 1, 2),  # (the item's backslash, then a byte)
    ("ab\\x1b…", 0, 3),  # (an ESC, whole in its one byte, shown escaped)
    ("ab\\x1b", 0, 3),  # (a whole item's text: no cut row)
])
def test_the_bytes_of_a_character_a_row_stops_inside(shown: str, partial: int,
                                                     whole: int) -> None:
    assert partial_bytes(shown) == partial
    assert cut_bytes(shown) == whole + partial


def test_the_note_says_what_a_rows_last_bytes_are() -> None:
    assert open_note(["https://a.example/\\xe2…"]) == BYTES
    assert open_note(["東\\xe4\\xba⟨+3 bits⟩…", "ab…"]) == (
        ", ⟨+N bits⟩ before the … the bits it holds of the next character's code, not enough "
        "to tell which character, \\xNN before the ⟨+N bits⟩ or … the first bytes of the next "
        "character as UTF-8 writes it (2 to 4 bytes past ASCII), not enough to tell which; the "
        "row's bytes count them")
    assert open_note(["ab⟨+2 bits⟩…"]) == (
        ", ⟨+N bits⟩ before the … the bits it holds of the next character's code, not enough "
        "to tell which character")
    assert open_note(["a\\\\xe2…", "ab…", "abc\\xe2", "ab\\x1b…"]) == ""
