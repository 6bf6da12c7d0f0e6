"""The run page says what a cut row's marks are, in the consoles' words
(``fedhh.codec.shown.cut_marks_note``, as `fedhh simulate` and `fedhh up` say it under their
lists): ``⟨+N bits⟩``, the bits a row holds of the next character's code, and ``\\xNN``, the
first bytes of a character it stops inside (``https://a.example/\\xe2…``, the first of the
three bytes of ``€``). Before, the page showed both and explained neither, and a row's
``\\xe2`` read as an escape of the item's own."""

from __future__ import annotations

import html
import math

from fedhh.codec.shown import cut_marks_note
from fedhh_coordinator.dashboard.pages import hits_table
from fedhh_coordinator.dashboard.results import Hit

URL = Hit(rank=1, item="https://a.example/\\xe2…", estimate=5.0, std=math.nan, round=3,
          truncated=True, bits=160, prefix_bytes=19, cause="lost in round 4")
TOKYO = Hit(rank=2, item="東\\xe4\\xba⟨+3 bits⟩…", estimate=4.0, std=math.nan, round=3,
            truncated=True, bits=43, prefix_bytes=5)
# (an item's own markup and its own ⟨+: text, and no mark of a cut row)
WHOLE = Hit(rank=1, item="<b>x⟨+3 bits⟩</b>", estimate=9.0, std=math.nan, round=1)
PLAIN = Hit(rank=3, item="ab…", estimate=3.0, std=math.nan, round=3, truncated=True, bits=16,
            prefix_bytes=2)


def _note(page: str) -> str:
    """The page's line on the marks, as a reader sees it ('' where there is none)."""
    lines = page.split('<p class="note marks">')[1:]
    assert len(lines) <= 1
    return html.unescape(lines[0].split("</p>")[0]) if lines else ""


def test_the_page_says_what_a_cut_rows_marks_are() -> None:
    page = str(hits_table("r1", [WHOLE], [URL, TOKYO, PLAIN]))
    said = cut_marks_note([URL.item, TOKYO.item])
    assert "⟨+N bits⟩ before the … the bits it holds of the next character's code" in said
    assert "\\xNN before the ⟨+N bits⟩ or … the first bytes of the next character" in said
    assert _note(page) == f"In a cut row: {said.removeprefix(', ')}."
    assert "<b>x" not in page and "&lt;b&gt;x" in page  # (the item escaped, as before)


def test_a_truncated_heavy_hitter_is_explained_too() -> None:
    # (a run without completion rounds lists its cut items among the heavy hitters)
    cut = Hit(rank=1, item="https://a.example/\\xe2…", estimate=5.0, std=math.nan, round=1,
              truncated=True, bits=160, prefix_bytes=19)
    assert _note(str(hits_table("r1", [cut]))).startswith("In a cut row: \\xNN before the … "
                                                          "the first byte of the next")


def test_no_line_where_no_row_shows_a_mark() -> None:
    assert _note(str(hits_table("r1", [WHOLE], [PLAIN]))) == ""
    assert _note(str(hits_table("r1", [WHOLE]))) == ""
    # (an ESC at a whole item's end, escaped: whole in its one byte, no partial character)
    esc = Hit(rank=2, item="ab\\x1b…", estimate=3.0, std=math.nan, round=3, truncated=True,
              bits=24, prefix_bytes=3)
    assert _note(str(hits_table("r1", [], [esc]))) == ""
