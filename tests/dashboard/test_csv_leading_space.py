"""The dashboard CSV's guard reads a cell after its leading whitespace and format characters:
a sheet that trims spaces on import (LibreOffice's "Trim spaces", a paste) runs `` =1+1`` as
the formula ``=1+1``, and a zero-width space, a word joiner or a byte-order mark before the
``=`` draws as nothing. Before, the guard read the first character alone, and these cells
reached the file bare. (The download shows items escaped as the page does, a leading space
as ``\\x20``, so there the guard is a second line: ``csv_cell`` is given any cell.)"""

from __future__ import annotations

import csv
import io
import math
import unicodedata

import pytest

from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import csv_cell, hits_csv

HIDDEN_FORMULAS = [" =1+1", "   =HYPERLINK(\"http://x.invalid\")", "\u00a0+1+1", "\u3000-1+1",
                   " @SUM(1,1)", "\u200b=1+1", "\ufeff=1+1", "\u2060=1", "\u200e=1",
                   " \u200b ＝1+1", " 007", " true", " 1e5", "\u200b#N/A"]
TEXT = [" a=1", " new york", "\u200bword", "  "]


@pytest.mark.parametrize("item", HIDDEN_FORMULAS)
def test_a_formula_or_value_behind_space_or_an_invisible_character_is_kept_text(
        item: str) -> None:
    assert csv_cell(item) == "'" + item


@pytest.mark.parametrize("item", TEXT)
def test_text_behind_space_is_as_it_is(item: str) -> None:
    assert csv_cell(item) == item


@pytest.mark.parametrize("item", ["\tabc", "\rabc"])
def test_a_leading_tab_or_carriage_return_is_still_kept_text(item: str) -> None:
    assert csv_cell(item) == "'" + item


def test_no_cell_of_the_csv_starts_a_formula_behind_space() -> None:
    """In the download the items are shown as on the page first (a leading space as ``\\x20``,
    a zero-width space as ``\\u200b``), so none reached a sheet as a formula there; the guard
    holds for any cell it is given."""
    items = HIDDEN_FORMULAS + TEXT
    hits = [Hit(rank=i + 1, item=item, estimate=10.0, std=math.nan, round=1)
            for i, item in enumerate(items)]
    cells = [row["item"] for row in csv.DictReader(io.StringIO(hits_csv(hits, [])))]
    for cell in cells:
        folded = unicodedata.normalize("NFKC", cell)
        shown = "".join(char for char in folded
                        if not char.isspace() and unicodedata.category(char) != "Cf")
        assert cell.startswith("'") or not shown.startswith(("=", "+", "-", "@")), cell
