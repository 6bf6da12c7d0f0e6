"""The command docs/datasets.md gives to write a table of (user, item) rows as JSON lines reads
the CSV a spreadsheet exports: Excel's "CSV UTF-8" begins with a byte-order mark, ends its lines
with CRLF, separates with ``;`` where the comma is a decimal mark and quotes a field holding a
separator or a line break. Before, the command read the header as one column named
``\\ufeffuser;item`` and failed with KeyError: 'user'. A quoted line break is kept, and the
import refuses it by name (an item is one line)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedhh.data.dataset import load_dataset
from fedhh.data.jsonl import import_jsonl
from fedhh.errors import DatasetError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "datasets.md"
ROWS = [("1", "new york"), ("1", "café"), ("2", "1,5"), ("2", "a;b"), ("1", "café"),
        ("3", '"quoted"'), ("2", "👍🏽")]


def _command() -> str:
    """The Python program of the docs' CSV command (``python3 -c '...' rows.csv``)."""
    found = re.search(r"^python3 -c '(import csv.*?)' rows\.csv > users\.jsonl$",
                      DOCS.read_text(encoding="utf-8"), re.MULTILINE)
    assert found is not None, "docs/datasets.md gives no CSV conversion command"
    return found.group(1)


def _csv(separator: str, mark: bool, rows: list[tuple[str, str]] = ROWS) -> bytes:
    def field(value: str) -> str:
        if any(c in value for c in (separator, '"', "\r", "\n")):
            return '"' + value.replace('"', '""') + '"'
        return value

    lines = [f"user{separator}item"] + [f"{field(u)}{separator}{field(i)}" for u, i in rows]
    return ("\ufeff" if mark else "").encode() + "\r\n".join(lines).encode() + b"\r\n"


def _converted(tmp_path: Path, table: bytes) -> subprocess.CompletedProcess[bytes]:
    rows = tmp_path / "rows.csv"
    rows.write_bytes(table)
    done = subprocess.run([sys.executable, "-c", _command(), str(rows)], capture_output=True,
                          check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done


@pytest.mark.parametrize(("separator", "mark"), [(";", True), (",", False), ("\t", False),
                                                 (",", True)])
def test_the_docs_command_writes_a_spreadsheets_csv_as_its_users(
        tmp_path: Path, separator: str, mark: bool) -> None:
    done = _converted(tmp_path, _csv(separator, mark))
    users = tmp_path / "users.jsonl"
    users.write_bytes(done.stdout)
    assert [json.loads(line) for line in done.stdout.decode().splitlines()] == [
        [i for u, i in ROWS if u == user] for user in ("1", "2", "3")]
    dataset = load_dataset(import_jsonl(users, tmp_path / "ds"))
    assert sorted(dataset.vocabulary) == sorted({i for _, i in ROWS})


def test_a_quoted_line_break_is_kept_and_refused_by_name(tmp_path: Path) -> None:
    done = _converted(tmp_path, _csv(";", True, [("1", "hello\r\nworld"), ("2", "x")]))
    assert done.stdout.decode().splitlines() == ['["hello\\r\\nworld"]', '["x"]']
    users = tmp_path / "users.jsonl"
    users.write_bytes(done.stdout)
    with pytest.raises(DatasetError, match=re.escape(
            "line 1: item 1 ('hello\\r\\nworld') holds a line break (\\r); an item is one line")):
        import_jsonl(users, tmp_path / "ds")
