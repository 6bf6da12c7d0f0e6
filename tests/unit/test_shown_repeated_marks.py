"""A nonspacing mark repeated draws over itself: ``กิิ`` (a Thai vowel sign twice) and ``กิ``
showed as two rows that read alike. The repeat is escaped (fedhh.codec.shown.printable); a
mark after another mark, as the words of Indic and Thai scripts hold them, shows as it is."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import printable


@pytest.mark.parametrize(("item", "shown"), [
    ("\u0e01\u0e34\u0e34", "\u0e01\u0e34\\u0e34"),
    ("\u0e01\u0e34\u0e34\u0e34", "\u0e01\u0e34\\u0e34\\u0e34"),
    ("x\u0336\u0336", "x\u0336\\u0336"),  # (NFC-normal: no other rule escaped it)
    ("\u0915\u093f\u0902\u0902", "\u0915\u093f\u0902\\u0902"),
])
def test_a_repeated_mark_is_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown
    assert printable(item) != printable(item[:-1])


@pytest.mark.parametrize("item", [
    "\u0e01\u0e34", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",  # สวัสดีครับ
    "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f",
    "\u0645\u064f\u062d\u064e\u0645\u064e\u0651\u062f",  # مُحَمَّد
])
def test_marks_of_words_show_as_they_are(item: str) -> None:
    assert printable(item) == item
