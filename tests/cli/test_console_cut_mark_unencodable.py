"""On a standard output whose encoding lacks ``…`` (ASCII, Latin-1), a cut row's mark is written
as its escape, ``\\u2026``, which is how a whole item's own last ``…`` is shown everywhere
(``printable``): the whole item ``wait…`` and the cut row standing for every item starting
``wait`` were both written ``wait\\u2026``. The whole item's is written ``\\U00002026`` there,
the same character's long escape; an item whose text is a backslash and ``u2026`` keeps its
doubled backslash."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.codec.shown import ELLIPSIS, cut_text, ljust, printable

LONG = "wait" + "x" * 300


def _written(monkeypatch: pytest.MonkeyPatch, encoding: str, *cells: str) -> list[str]:
    """Each cell, padded to 12 columns as a list's item column is, as stdout in ``encoding``
    (with the CLI's backslash escapes) writes it."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding, errors="backslashreplace",
                           write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    for cell in cells:
        out.write(ljust(cell, 12) + "|\n")
    return raw.getvalue().decode(encoding).splitlines()


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_whole_items_ellipsis_and_a_cut_rows_read_apart(
        monkeypatch: pytest.MonkeyPatch, encoding: str) -> None:
    whole, cut, own = _written(monkeypatch, encoding, printable("wait…"),
                               printable(cut_text("wait") + ELLIPSIS, cut=True),
                               printable("wait\\u2026"))
    assert whole == "wait\\U00002026|"
    assert cut == "wait\\u2026  |"  # (padded by the columns written)
    assert own == "wait\\\\u2026 |"
    assert len({whole, cut, own}) == 3


def test_a_unicode_output_keeps_the_short_escape_and_the_mark(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _written(monkeypatch, "utf-8", printable("wait…"),
                    printable(cut_text("wait") + ELLIPSIS, cut=True)) == [
        "wait\\u2026  |", "wait…       |"]


def test_data_inspect_on_an_ascii_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.jsonl"
    users.write_text(f'["wait…", "{LONG}"]\n' * 3, encoding="utf-8")
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii",
                                                        write_through=True))
    assert main(["data", "inspect", str(users)]) == 0
    rows = [line.split() for line in raw.getvalue().decode("ascii").splitlines()]
    items = [row[1] for row in rows if len(row) == 4 and row[0].isdigit()]
    assert "wait\\U00002026" in items
    assert any(item.startswith("waitxxx") and item.endswith("x\\u2026") for item in items)
