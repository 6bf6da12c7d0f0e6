"""The presentation selectors VS15 and VS16 are shown as they are only where they change what is
drawn: after a character with emoji variation sequences (UTS #51), VS15 after one drawn as an
emoji by default (``👍︎``, ``⌚︎``: their text glyphs), VS16 after one drawn as text (``☺️``).
Anywhere else they ask for what is drawn without them, so they are escaped. Before, ``☺︎``
and ``☺`` (a text-default emoji), ``ℹ︎`` and ``ℹ``, ``→︎`` and ``→``, ``→️`` and ``→`` were
rows that read alike in the consoles and on the dashboard."""

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


@pytest.mark.parametrize(("item", "shown"), [
    ("\u2192\ufe0f", "\u2192\\ufe0f"), ("\u2605\ufe0f", "\u2605\\ufe0f"),  # → and ★: no emoji
    ("\u2713\ufe0f", "\u2713\\ufe0f"), ("\u2605\ufe0e", "\u2605\\ufe0e"),
    ("\u303d\ufe0e", "\u303d\\ufe0e"),  # (〽 is text by default, wide as it is)
])
def test_a_selector_after_a_character_without_emoji_variants_is_escaped(
        item: str, shown: str) -> None:
    # (before, VS16 after any symbol was kept: →️ and → were two rows that read →)
    assert printable(item) == shown


@pytest.mark.parametrize("item", ["\xa9\ufe0f", "\u2714\ufe0f", "\u2764\ufe0f\u200d\U0001f525",
                                  "\U0001f321\ufe0f", "\u2268\ufe00"])
def test_the_emoji_variation_sequences_are_shown_as_they_are(item: str) -> None:
    # (and the other standardized variants, ≨ with VS1, as before)
    assert printable(item) == item


def test_the_presentations_of_two_emoji_read_as_six_rows() -> None:
    # (each raw selector left changes the glyph: ☺ text, ☺️ emoji; 👍 emoji, 👍︎ text)
    items = ["\u263a", "\u263a\ufe0e", "\u263a\ufe0f", "\U0001f44d", "\U0001f44d\ufe0e",
             "\U0001f44d\ufe0f"]
    assert printable_rows([(item, False) for item in items]) == [
        "\u263a", "\u263a\\ufe0e", "\u263a\ufe0f", "\U0001f44d", "\U0001f44d\ufe0e",
        "\U0001f44d\\ufe0f"]
