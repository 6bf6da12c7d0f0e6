"""The text presentation selector VS15 (U+FE0E) is shown as it is only where it changes what is
drawn: after an emoji drawn as one by default (``👍︎``, ``⌚︎``: their text glyphs). After any
other character it asks for what is drawn without it, so it is escaped, as VS16 is after an
emoji already drawn as one. Before, ``☺︎`` and ``☺`` (a text-default emoji), ``ℹ︎`` and ``ℹ``,
``→︎`` and ``→`` were rows that read alike in the consoles and on the dashboard."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import printable, printable_rows


@pytest.mark.parametrize(("item", "shown"), [
    ("\u263a\ufe0e", "\u263a\\ufe0e"), ("\u2764\ufe0e", "\u2764\\ufe0e"),
    ("\u2139\ufe0e", "\u2139\\ufe0e"), ("\u2192\ufe0e", "\u2192\\ufe0e"),
    ("x\u263a\ufe0ey", "x\u263a\\ufe0ey"),
])
def test_a_text_selector_that_changes_nothing_is_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


@pytest.mark.parametrize("item", [
    "\U0001f44d\ufe0e", "\u231a\ufe0e", "\u2614\ufe0e",  # emoji drawn as emoji by default
    "\u263a\ufe0f", "\u2139\ufe0f", "\u263a",  # VS16 after text-default ones, and none
])
def test_a_selector_that_changes_the_glyph_is_shown_as_it_is(item: str) -> None:
    assert printable(item) == item


def test_the_presentations_of_two_emoji_read_as_six_rows() -> None:
    # (each raw selector left changes the glyph: ☺ text, ☺️ emoji; 👍 emoji, 👍︎ text)
    items = ["\u263a", "\u263a\ufe0e", "\u263a\ufe0f", "\U0001f44d", "\U0001f44d\ufe0e",
             "\U0001f44d\ufe0f"]
    assert printable_rows([(item, False) for item in items]) == [
        "\u263a", "\u263a\\ufe0e", "\u263a\ufe0f", "\U0001f44d", "\U0001f44d\ufe0e",
        "\U0001f44d\\ufe0f"]
