"""The dashboard's CSV download names the run on every row (``run_id``, before ``run_state``),
as each row names its round, so that two runs' files put together (``cat``, one sheet) still
say which run found each row (before, only the file's name did: round 2 of r1 and round 2 of r2
read alike). A run id a sheet would read as a date or a formula keeps its text."""

from __future__ import annotations

import csv
import io
import math

from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import hits_csv

WHOLE = Hit(rank=1, item="👩\u200d💻", estimate=10.0, std=math.nan, round=2)
CUT = Hit(rank=1, item="https://example\u2026", estimate=5.0, std=math.nan, round=2,
          truncated=True, bits=121, cause="lost in round 3")


def test_every_row_names_its_run() -> None:
    joined = hits_csv([WHOLE], [CUT], "done", "r1") + "".join(
        hits_csv([WHOLE], [], "running", "r2").splitlines(keepends=True)[1:])
    table = list(csv.DictReader(io.StringIO(joined)))
    assert [(r["run_id"], r["round"], r["item"], r["kind"]) for r in table] == [
        ("r1", "2", WHOLE.item, "heavy hitter"), ("r1", "2", CUT.item, "cut prefix"),
        ("r2", "2", WHOLE.item, "heavy hitter")]
    assert list(table[0])[-2:] == ["run_id", "run_state"]


def test_a_run_id_a_sheet_would_read_as_a_value_keeps_its_text() -> None:
    table = list(csv.DictReader(io.StringIO(hits_csv([WHOLE], [], "done", "2026-12-04"))))
    assert table[0]["run_id"] == "'2026-12-04"
