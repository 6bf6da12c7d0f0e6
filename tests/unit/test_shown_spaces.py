"""Items with spaces as people see them (`fedhh.codec.shown.printable`): a space at either end
of an item, and the kinds of space (U+0020, the no-break U+00A0, the ideographic U+3000, the
thin U+2009...), never make two items look alike. Before, ``new york`` and ``new\\xa0york``
showed alike, as did ``trail`` and ``trail `` in a padded column."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec.shown import ljust, printable

ZS = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Zs"]
SPACY = st.text(alphabet=st.sampled_from([*ZS, "a", "\\", "x", "2", "0", "東", "\u2026",
                                              "\u2800", "\U0001d159"]),
                max_size=8)


@pytest.mark.parametrize(("item", "shown"), [
    ("new york", "new york"),
    ("how  to", "how  to"),
    (" lead", "\\x20lead"),
    ("trail ", "trail\\x20"),
    (" both ", "\\x20both\\x20"),
    (" ", "\\x20"),
    ("   ", "\\x20 \\x20"),
    ("new\u00a0york", "new\\xa0york"),
    ("東京\u3000駅", "東京\\u3000駅"),
    ("1\u2009000", "1\\u2009000"),
    ("a\u202fb\u205fc\u1680d", "a\\u202fb\\u205fc\\u1680d"),
    ("a\\x20", "a\\\\x20"),  # (the item's own backslash is doubled: not an escape)
    # symbols that draw blank (before, shown as they are: new⠀york read new york)
    ("new\u2800york", "new\\u2800york"),
    ("a\u2800", "a\\u2800"),
    ("\u2801\u2800\u2803", "\u2801\\u2800\u2803"),
    ("x\U0001d159y", "x\\U0001d159y"),
])
def test_spaces_that_hide_are_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


def test_a_cut_prefix_ending_in_a_space_shows_it() -> None:
    assert printable("new \u2026", cut=True) == "new\\x20\u2026"
    assert printable("new\u2026", cut=True) == "new\u2026"
    assert printable(" a\\xe6\u2026", cut=True) == "\\x20a\\xe6\u2026"


def test_padded_items_ending_in_a_space_do_not_look_alike() -> None:
    assert ljust(printable("trail "), 12) != ljust(printable("trail"), 12)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(SPACY, SPACY)
def test_two_items_of_spaces_never_show_alike(one: str, other: str) -> None:
    if one != other:
        assert printable(one) != printable(other)
        assert printable(one).strip() != printable(other).strip()  # (padding hides nothing)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(SPACY)
def test_no_space_but_u0020_is_shown_and_none_at_the_ends(item: str) -> None:
    shown = printable(item)
    assert all(ch == " " or unicodedata.category(ch) != "Zs" for ch in shown)
    assert "\u2800" not in shown and "\U0001d159" not in shown  # (they draw blank too)
    assert shown == shown.strip()
