"""A run of nonspacing or enclosing marks is shown as it is up to its 4th mark; each past it
is escaped (UTS #39, section 5.4, flags a run of more than 4). Before, a letter and 50 marks
("zalgo" text) reached the console and the dashboard whole, a stack that draws over the rows
above and below it."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import printable

# Marks above, of one combining class, no two alike (a repeat is escaped anyway) and composing
# with nothing: text NFC leaves as it is.
MARKS = "\u0346\u034a\u034b\u034c\u0350\u0351\u0352\u0357\u035b\u0363"


def test_a_letter_and_fifty_marks_shows_four() -> None:
    zalgo = "q" + (MARKS * 5)
    assert len(zalgo) == 51
    shown = printable(zalgo)
    assert shown == "q" + MARKS[:4] + "".join(f"\\u{ord(c):04x}" for c in zalgo[5:])


@pytest.mark.parametrize("item", [
    "q" + MARKS[:4], "x" + MARKS[:4] + "y" + MARKS[4:8],  # (a letter ends the run)
    "\u0f56\u0f66\u0f92\u0fb2\u0f74\u0f66",  # Tibetan: a stack of 3 marks
    "\u0915\u094d\u0937\u093f", "#\ufe0f\u20e3",  # Devanagari, a keycap (VS16 and U+20E3)
])
def test_real_texts_runs_are_shown_as_they_are(item: str) -> None:
    assert printable(item) == item


def test_a_run_in_a_cut_prefix_is_counted_the_same() -> None:
    assert printable("q" + MARKS[:6] + "\\xcc…", cut=True) == (
        "q" + MARKS[:4] + "\\u0350\\u0351\\xcc…")
