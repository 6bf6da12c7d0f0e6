"""On a standard output whose encoding lacks an item's characters (an ASCII or Latin-1 locale,
a Windows console redirected to a file), the CLI writes them as backslash escapes, and the
lists pad each item by the columns of what is written. Before, they padded by the characters'
own columns: ``東京`` took 4 and was written as 12 (``\\u6771\\u4eac``), so every such row's
counts stood out of line, and a Hebrew item's left-to-right marks were written as
``\\u200e``."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from fedhh.cli.main import main

ITEMS = "café 東京 a 😀 שלום"


def _inspect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoding: str) -> list[str]:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.txt"
    users.write_text(f"{ITEMS}\ncafé 東京 a\ncafé\n", encoding="utf-8")
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding=encoding,
                                                        write_through=True))
    assert main(["data", "inspect", str(users)]) == 0
    lines = raw.getvalue().decode(encoding).splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "item"])
    return lines[start:]


@pytest.mark.parametrize("encoding, shown", [
    ("ascii", ["caf\\xe9", "\\u6771\\u4eac", "\\U0001f600", "\\u05e9\\u05dc\\u05d5\\u05dd"]),
    ("latin-1", ["café", "\\u6771\\u4eac", "\\U0001f600", "\\u05e9\\u05dc\\u05d5\\u05dd"]),
])
def test_rows_stay_in_line_with_their_items_escaped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoding: str,
        shown: list[str]) -> None:
    table = _inspect(tmp_path, monkeypatch, encoding)
    assert len(table) == 6
    for item in shown:
        assert any(item in row for row in table[1:])
    assert not any("\\u200e" in row for row in table)
    # every row's counts end where the heading's columns do
    ends = {len(row) for row in table}
    assert ends == {len(table[0])}


def test_a_utf8_output_keeps_the_items_and_their_marks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _inspect(tmp_path, monkeypatch, "utf-8")
    assert any("\u200eשלום\u200e" in row for row in table)
    assert any("東京" in row for row in table) and any("😀" in row for row in table)
