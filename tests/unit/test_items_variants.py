"""Lookalikes beyond Latin, Greek and Cyrillic are made visible on the consoles and the
dashboard (``fedhh.codec.shown.printable``): an item that mixes Latin letters with Armenian,
Cherokee or Lisu ones, or with a font, width or ligature variant of a letter (``ﬁnance`` from
a PDF's ligature, ``ｐaypal``, ``𝐩aypal``), showed as it is, two rows that read alike beside
``finance`` or ``paypal``. Items of one kind, and scripts that look like none of these (CJK,
Hangul's compatibility jamo), show as before."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec.shown import printable

ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|\\)")


@pytest.mark.parametrize(("item", "shown"), [
    ("\ufb01nance", "\\ufb01nance"),  # the ligature fi
    ("\uff50aypal", "\\uff50aypal"),  # a fullwidth p
    ("\U0001d429aypal", "\\U0001d429aypal"),  # a mathematical bold p
    ("g\u0585\u0585gle", "g\\u0585\\u0585gle"),  # Armenian oh
    ("\u13aaBC", "\\u13aaBC"),  # a Cherokee A
    ("\ua4eec", "\\ua4eec"), ("\ua4ee\ua4f0c", "\ua4ee\ua4f0\\x63"),  # Lisu A, E; a tie keeps Latin
])
def test_mixed_variants_and_lookalikes_are_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


@pytest.mark.parametrize("item", [
    "\uff50\uff41\uff59\uff50\uff41\uff4c",  # all fullwidth: one kind
    "\ufb01", "\uff21", "\uff21\uff22\uff23\u682a\u5f0f\u4f1a\u793e", "T\u30b7\u30e3\u30c4",
    "\u314b\u314blol",  # Hangul compatibility jamo: no Latin lookalike
    "x\u00b5m", "n\u00ba",  # the micro sign, the ordinal indicator (one letter's forms)
    "\u0561\u0562\u0563", "finance",
])
def test_items_of_one_kind_show_as_they_are(item: str) -> None:
    assert printable(item) == item


LETTERS = st.sampled_from(list("afinpy\ufb01\ufb02\uff41\uff50\U0001d429\u0585\u057d"
                               "\u13aa\u0430\u043e.-"))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(LETTERS, min_size=1, max_size=10))
def test_an_item_that_reads_as_a_latin_one_shows_an_escape(item: str) -> None:
    """An item with a Latin letter that folds (NFKC, then each lookalike to its Latin letter)
    to another item, a Latin one, shows an escape: it never reads as that item."""
    fold = str.maketrans("\u0585\u057d\u13aa\u0430\u043e", "osAao")
    latin = unicodedata.normalize("NFKC", item).translate(fold)
    if latin == item or not any(char.isascii() and char.isalpha() for char in item):
        return
    assert latin.isascii()
    assert ESCAPE.search(printable(item)), printable(item)
