"""The dashboard's page and CSV say why each cut row was not completed, as the consoles (the
``why`` column) and the JSON download (``cause``) do (before, the page said only "cut at N
bits" and the CSV had no such column: an item that could not come back whole did not say why
there)."""

from __future__ import annotations

import csv
import io
import math

from fedhh_coordinator.dashboard.pages import hits_table
from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import hits_csv

WHOLE = Hit(rank=1, item="apple", estimate=10.0, std=math.nan, round=1)
CUT = Hit(rank=1, item="https://example\u2026", estimate=5.0, std=math.nan, round=3,
          truncated=True, bits=121, cause="lost in round 4")


def test_the_page_says_why_a_prefix_was_cut() -> None:
    page = str(hits_table("r1", [WHOLE], [CUT]))
    assert "(cut at 121 bits: every item starting so; lost in round 4)" in page


def test_the_csv_says_why_a_prefix_was_cut() -> None:
    table = list(csv.DictReader(io.StringIO(hits_csv([WHOLE], [CUT]))))
    assert [row["cause"] for row in table] == ["", "lost in round 4"]
    assert [row["truncated_at_bits"] for row in table] == ["", "121"]
    assert list(table[0])[-1] == "run_state"
