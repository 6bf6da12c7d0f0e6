"""The dashboard's CSV keeps an item a spreadsheet would read as a value as text: ``007`` showed
as 7, ``1e5`` as 100000 and ``3/4`` as a date in a sheet, and pandas' read_csv made them
numbers, and read ``None``, ``<NA>`` and ``#N/A`` as missing (a sheet ``#N/A`` as an error
value); such a cell gets the leading apostrophe a formula's gets (docs/dashboard.md), which a
reader drops to have the item back."""

from __future__ import annotations

import csv
import io
import math

import pytest

from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import csv_cell, hits_csv

VALUES = ["007", "1e5", "-0", "3.14159", ".5", "(5)", "$5", "3/4", "2024-01-02", "12:30",
          "jan 5", "March 2024", "TRUE", "false", "NaN", "N/A", "1password.com",
          # (pandas' read_csv reads these as missing, a sheet the # ones as error values)
          "None", "<NA>", "#N/A", "#NA", "#N/A N/A", "#n/a", "#DIV/0!", "#VALUE!", "#REF!",
          "#NAME?", "#NUM!", "#NULL!", "#SPILL!", "#CALC!",
          # amounts in any currency, as locales write them
          "\u20b9500", "\u20a9500", "\u20bd5", "\u20bf1", "\xa250", "\u20c05", "\u20ac 5",
          "$ 5", "R$ 5", "US$5", "($5)", "5 \u20ac", "\uffe55"]
TEXT = ["apple", "東京", "hello 2", "may", "🇯🇵", "the", "user@example.com", "https://x.org/1",
        "#NAS", "#nature", "none of it", "<NAME>", "#REF", "\u20ac", "$", "USD", "abcd$5",
        "\u20acuro 5"]


@pytest.mark.parametrize("item", VALUES)
def test_a_value_like_item_is_kept_text(item: str) -> None:
    assert csv_cell(item) == "'" + item


@pytest.mark.parametrize("item", TEXT)
def test_plain_text_is_as_it_is(item: str) -> None:
    assert csv_cell(item) == item


def test_the_csv_reads_back_every_item() -> None:
    hits = [Hit(rank=i + 1, item=item, estimate=10.0, std=math.nan, round=1)
            for i, item in enumerate(VALUES + TEXT + ["'007"])]
    table = list(csv.DictReader(io.StringIO(hits_csv(hits, []))))
    cells = [row["item"] for row in table]
    assert [cell[1:] if cell.startswith("'") else cell for cell in cells] == VALUES + TEXT + [
        "'007"]
    assert cells[0] == "'007" and cells[-1] == "''007"
