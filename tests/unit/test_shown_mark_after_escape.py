"""A combining mark after a character shown escaped is escaped too: kept raw, it drew on the
escape's last character (``\\x1b́``, ``a\\u200b́b`` with the accent over the escape's ``b``,
``p\\u0430́ypal``), so the row read as an escape holding an accented letter."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import printable


@pytest.mark.parametrize(("item", "shown"), [
    ("\x1b\u0301", "\\x1b\\u0301"), ("a\u200b\u0301b", "a\\u200b\\u0301b"),
    (" \u0301", "\\x20\\u0301"),  # (a leading space is shown \x20)
    ("\ufffd\u0301", "\\ufffd\\u0301"), ("\u3000\u0301", "\\u3000\\u0301"),
    ("a\\\u0301", "a\\\\\\u0301"),  # (a backslash is shown doubled)
    ("p\u0430\u0301ypal", "p\\u0430\\u0301ypal"),  # (a lookalike letter, escaped)
    ("x\u0e34\u0e34\u0e48", "x\u0e34\\u0e34\\u0e48"),  # (after a repeat, escaped)
])
def test_a_mark_after_an_escape_is_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


@pytest.mark.parametrize("item", ["a \u0301", "\u0915\u094d\u0937", "#\ufe0f\u20e3",
                                  "\u0e01\u0e34\u0e48"])
def test_a_mark_on_a_character_shown_as_it_is_stays(item: str) -> None:
    assert printable(item) == item
