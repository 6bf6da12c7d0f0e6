"""The dashboard CSV keeps text an item that begins with the minus sign U+2212 before a
number: LibreOffice's number scanner takes ``−`` for ``-`` (tdf#117037, ``GetSign`` in
svl's zforfind.cxx), so ``−5`` read as the number -5, the item lost (before, it reached the
file bare). Neither it nor any other dash starts a formula, and no sheet reads a number after
the other dashes, so ``−A1``, ``–5`` and ``ー1`` (U+30FC, which OWASP's CSV Injection page
does not list beside ``－``) stay as they are: the guard marks what a sheet evaluates, no more."""

from __future__ import annotations

import csv
import io
import math

import pytest

from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import csv_cell, hits_csv

# (⁻ U+207B and ₋ U+208B fold to U+2212 under NFKC, as Apple Numbers reads a cell)
NUMBERS = ["−5", "−1.5", "−.5", "−1e5", "−(5)", "−$5", "−3/4", "⁻5", "₋5"]
TEXT = ["−A1", "−", "−a", "−jan 5", "−true", "–5", "—5", "‐5", "‒5", "―5", "ー1", "ー", "˗5",
        "➖5", "−\u20125"]


@pytest.mark.parametrize("item", NUMBERS)
def test_a_number_after_the_minus_sign_is_kept_text(item: str) -> None:
    assert csv_cell(item) == "'" + item


@pytest.mark.parametrize("item", TEXT)
def test_other_dashes_and_the_minus_sign_before_no_number_are_as_they_are(item: str) -> None:
    assert csv_cell(item) == item


@pytest.mark.parametrize("item", NUMBERS + TEXT)
def test_the_csv_file_holds_the_cell_as_guarded(item: str) -> None:
    """(each item alone: rows read against each other escape look-alikes, ``\\u2212``)"""
    hit = Hit(rank=1, item=item, estimate=10.0, std=math.nan, round=1)
    [row] = csv.DictReader(io.StringIO(hits_csv([hit], [])))
    assert row["item"] == ("'" + item if item in NUMBERS else item)
