"""The dashboard CSV's guard reads a cell as a sheet does, through its NFKC form: fullwidth
``＝`` ``＋`` ``－`` ``＠`` (and the small forms, superscript ``⁼``, subscript ``₊``) start a
formula in Apple Numbers and Japanese Excel (OWASP's CSV Injection page lists the fullwidth
ones), and fullwidth digits read as a number. Before, the guard knew ASCII alone:
``＝cmd|' /C calc'!A0`` and ``＠SUM(1)`` reached the file bare, and ``１２３`` and ``٧`` too."""

from __future__ import annotations

import csv
import io
import math

import pytest

from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import csv_cell, hits_csv

FORMULAS = ["＝cmd|' /C calc'!A0", "＋1+1", "－1+1", "＠SUM(1,1)", "﹦1+1", "﹢1", "﹣1",
            "﹫SUM(1)", "⁼1+1", "₊1", "＝HYPERLINK(\"http://x.invalid\")"]
VALUES = ["１２３", "７", "٧", "٣٫٥", "۱۲۳", "１e5", "＄５", "３/４", "१२३", "＃N/A", "²",
          "Ｔｒｕｅ", "＇007"]
TEXT = ["東京", "ー1", "カタカナ", "a٧", "＃nature"]  # ("−5": test_csv_minus_sign.py)


@pytest.mark.parametrize("item", FORMULAS + VALUES)
def test_a_cell_a_sheet_folds_to_a_formula_or_value_is_kept_text(item: str) -> None:
    assert csv_cell(item) == "'" + item


@pytest.mark.parametrize("item", TEXT)
def test_other_non_ascii_text_is_as_it_is(item: str) -> None:
    assert csv_cell(item) == item


def test_the_csv_reads_back_every_item() -> None:
    items = FORMULAS + VALUES + TEXT
    hits = [Hit(rank=i + 1, item=item, estimate=10.0, std=math.nan, round=1)
            for i, item in enumerate(items)]
    cells = [row["item"] for row in csv.DictReader(io.StringIO(hits_csv(hits, [])))]
    guarded = len(FORMULAS + VALUES)
    assert all(cell.startswith("'") for cell in cells[:guarded])
    assert [cell[1:] for cell in cells[:guarded]] + cells[guarded:] == items
