"""Items that mix letters of Latin, Greek and Cyrillic, whose letters look alike, show the
letters of all but one of those scripts escaped (fedhh.codec.shown): ``pаypal`` with a
Cyrillic ``а`` and ``paypal`` were two console and dashboard rows that read alike."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec.shown import printable

ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|\\)")


@pytest.mark.parametrize(("item", "shown"), [
    ("p\u0430ypal", "p\\u0430ypal"),  # a Cyrillic a among Latin letters
    ("g\u043e\u043egle.com", "g\\u043e\\u043egle.com"),
    ("https://\u0430pple.com/", "https://\\u0430pple.com/"),
    ("\u041c\u043e\u0441\u043a\u0432a", "\u041c\u043e\u0441\u043a\u0432\\x61"),  # a Latin a
    ("\u03bf\u03bao", "\u03bf\u03ba\\x6f"),  # Greek with a Latin o
    ("a\u0431", "a\\u0431"), ("\u0431a", "\\u0431a"),  # a tie keeps Latin
    ("\u03b1\u0431", "\u03b1\\u0431"),  # ... else the first letter's script
    ("\u03a9mega", "\\u03a9mega"),
    ("p\u0430yp\u0430l\u200b", "p\\u0430yp\\u0430l\\u200b"),  # with what was escaped before
])
def test_mixed_lookalike_letters_are_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


@pytest.mark.parametrize("item", [
    "paypal", "\u041c\u043e\u0441\u043a\u0432\u0430", "\u03a9", "caf\u00e9", "na\u00efve",
    "\u0391\u03b8\u03ae\u03bd\u03b1 2004", "\u6771\u4eacTokyo", "Tokyo \u6771\u4eac",
    "x\u00b5m", "\u05e9\u05dc\u05d5\u05dd abc",  # (the micro sign, Hebrew: not lookalikes here)
])
def test_items_of_one_lookalike_script_show_as_they_are(item: str) -> None:
    assert printable(item) == item


def _scripts(shown: str) -> set[str]:
    plain = ESCAPE.sub("", shown)
    return {unicodedata.name(char, "").partition(" ")[0] for char in plain
            if unicodedata.category(char).startswith("L")} & {"LATIN", "GREEK", "CYRILLIC"}


LETTERS = st.sampled_from(list("aeopcxyABE\u0430\u0435\u043e\u0440\u0441\u0445\u0443"
                               "\u0410\u0412\u0415\u03bf\u03b1\u03c1\u0391\u0392\u0395"
                               "\u00e9\u0451.1-"))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(LETTERS, min_size=1, max_size=10))
def test_what_shows_unescaped_is_of_one_script(item: str) -> None:
    """So a mixed item never reads as an item of one script, whose letters show as they are."""
    shown = printable(item)
    assert len(_scripts(shown)) <= 1
    if len(_scripts(item)) <= 1:
        assert shown == item
