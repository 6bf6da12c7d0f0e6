"""``fedhh.codec.shown.fitted``: an item shown in at most a column's width, cut where it is wider
as a cut prefix is (``Decoded.shown_cut``: its characters, then ``…``), so that the cut reads
as the beginning of the item and its ``…`` never as the item's own text."""

from __future__ import annotations

import pytest

from fedhh.codec import Decoded
from fedhh.codec.shown import (
    columns,
    cut_item,
    fitted,
    fitted_row,
    fitted_rows,
    printable,
    printable_rows,
)


def _shown(text: str, width: int) -> str:
    return printable_rows([fitted(text, width)])[0]


@pytest.mark.parametrize("item", ["short", "東京", "x" * 24, "new york", "a\\b", "wait…"])
def test_an_item_that_fits_is_left_whole(item: str) -> None:
    assert fitted(item, 24) == (item, False)


@pytest.mark.parametrize(("item", "shown"), [
    ("x" * 40, "x" * 23 + "…"),
    ("東京" * 20, "東京" * 5 + "東…"),  # (a wide character is not split across the width)
    ("a\x1b" * 20, "a\\x1ba\\x1ba\\x1ba\\x1ba…"),  # (nor an escape: \x1 is no escape)
    ("a\\" * 20, "a\\\\a\\\\a\\\\a\\\\a\\\\a\\\\a\\\\a…"),  # (the item's \ shown \\ as ever)
    ("ab⟨+3 bits⟩cd" * 3, "ab\\u27e8+3 bits⟩cdab…"),  # (no tail: its ⟨ is the item's)
    ("wait…" * 9, "wait…wait…wait…wait…wai…"),  # (the … of the cut alone at the end)
])
def test_a_wider_item_is_cut_as_a_prefix_is(item: str, shown: str) -> None:
    cut, is_cut = fitted(item, 24)
    assert is_cut and _shown(item, 24) == shown and columns(shown) <= 24
    # (the cut reads back as the beginning of the item, as a cut prefix does)
    assert item.startswith(cut_item(cut)) and cut_item(cut)
    assert cut == Decoded(cut_item(cut), False, True, 0).shown_cut


def test_the_cut_reads_apart_from_an_item_of_that_text_ending_in_its_own_ellipsis() -> None:
    item = "x" * 40
    whole = "x" * 23 + "…"  # (an item: what the cut of ``item`` shows, as text)
    assert printable(whole) == "x" * 23 + "\\u2026"
    assert printable_rows([fitted(item, 24), fitted(whole, 30)]) == [
        "x" * 23 + "…", "x" * 23 + "\\u2026"]


@pytest.mark.parametrize("width", range(3, 30))
def test_what_the_cut_ends_on_shows_as_a_cut_prefix_shows_it(width: int) -> None:
    """A space before the … shows ``\\x20`` (it draws nothing there), a joiner that joins
    nothing ``\\u200d`` (``👨‍…`` read as ``👨…``); an emoji sequence is not split into more
    columns than the width."""
    for item in ("new york " * 5, "👨\u200d👩\u200d👧\u200d👦" * 20, "👨\u200d" + "x" * 40):
        shown = _shown(item, width)
        assert columns(shown) <= width, (item, shown)
        assert not shown.endswith((" …", "\u200d…")), shown
    assert _shown("👨\u200d" + "x" * 40, 9) == "👨\\u200d…"
    assert _shown("ab \x1b" * 3, 7) == "ab\\x20…"


def test_a_huge_item_is_cut_without_reading_it_all() -> None:
    assert fitted("B" * 1_000_000, 160) == ("B" * 159 + "…", True)


@pytest.mark.parametrize(("item", "cut", "shown"), [
    ("short", False, "short"),
    ("ab\\\\xc3…", True, "ab\\\\xc3…"),  # (a cut prefix that fits is left as it is)
    ("x" * 40 + "\\xc3⟨+3 bits⟩…", True, "x" * 23 + "…"),  # (cut further, its tail dropped)
    ("a\\\\" * 20 + "…", True, "a\\\\a\\\\a\\\\a\\\\a\\\\a\\\\a\\\\a…"),
])
def test_a_row_fits_its_column(item: str, cut: bool, shown: str) -> None:
    assert fitted_row(item, cut, 24) == (shown, cut or shown != item)


# (a flag is two regional indicators; an e under three marks; an emoji and its skin tone; a
# family joined by ZWJ; a keycap; conjuncts of Devanagari, Bengali, Gujarati, Telugu and
# Malayalam, one under a nukta, one of three consonants (UAX #29 GB9c); Hangul syllables of
# conjoining jamo, L V T and LV T and L LV (GB6-8))
@pytest.mark.parametrize(("head", "cluster"), [
    ("", "\U0001f1fa\U0001f1f8"), ("x", "\U0001f1fa\U0001f1f8"), ("abc", "e\u0300\u0301\u0302"),
    ("ab", "👍🏽"), ("", "👨\u200d👩\u200d👧"), ("", "1\ufe0f\u20e3"),
    ("x", "क्ष"), ("x", "ক্ষ"), ("x", "ગ્ર"), ("x", "త్ర"), ("x", "ക്ക"), ("x", "क़्ष"),
    ("", "क्ष्म"), ("x", "\u1100\u1161\u11a8"), ("x", "\uac00\u11a8"), ("", "\u1100\uac00")])
@pytest.mark.parametrize("width", [20, 21, 22, 23, 24])
def test_a_row_is_cut_between_grapheme_clusters(head: str, cluster: str, width: int) -> None:
    row = fitted_row(head + cluster * 30, False, width)
    body = cut_item(row[0])
    assert row[1] and body.startswith(head)
    kept = body[len(head):]
    assert kept == cluster * (len(kept) // len(cluster)), row
    # (fitted's search takes the widths of the prefixes as growing with their length, which a
    # joiner before the … breaks: the family's cut is not always the longest)
    shown = columns(printable_rows([row])[0])
    # (narrower, the e under marks, shown as escapes, 17 columns, may not fit after abc)
    assert shown <= width and (width < 24 or shown >= 12)


def test_a_first_cluster_wider_than_the_column_is_cut_inside_it() -> None:
    """A letter under 500 marks: its marks past the 4th show as escapes, each cut whole."""
    row = fitted_row("q" + "\u0334\u0335\u0336\u0337\u0338" * 100, False, 24)
    shown = printable_rows([row])[0]
    assert row[1] and shown == "q\u0334\u0335\u0336\u0337\\u0338\\u0334\\u0335…"
    assert columns(shown) <= 24


# (Latin, its Cyrillic and Greek look-alikes, a mark UTS #39 maps, a wide character)
_LOOKALIKE_LETTERS = "coaxpeсоахреοα\u0619東"


@pytest.mark.parametrize("width", [24, 48])
def test_rows_that_read_alike_are_fitted_with_their_escapes(width: int) -> None:
    """A row that reads as another's shows its look-alike characters escaped, six columns
    each or more: it is cut to the column with them counted. Before, ``сосоа`` * 20 beside
    ``cocoa`` * 20, each cut to 48 columns, showed in 283."""
    import random

    rng = random.Random(20261206)
    for _ in range(60):
        items = ["".join(rng.choice(_LOOKALIKE_LETTERS) for _ in range(rng.randrange(4, 90)))
                 for _ in range(rng.randrange(2, 8))]
        items += ["сосоа" * 20, "cocoa" * 20]  # (at least one pair that reads alike)
        rows = [(item, rng.random() < 0.3) for item in items]
        fitted_list = fitted_rows(rows, width)
        for (item, cut), row, shown in zip(rows, fitted_list, printable_rows(fitted_list),
                                           strict=True):
            assert columns(shown) <= width, (item, row, shown)
            # (a row stays the beginning of its item, and a cut one says it is cut)
            whole = cut_item(item) if cut else item
            assert row == (item, cut) or (row[1] and whole.startswith(cut_item(row[0])))
