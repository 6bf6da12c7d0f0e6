"""`fedhh data import --format`: a tabular format (csv) is told what to write instead, and a
format in capitals is the format (before: "invalid choice: 'csv'" with no word of how to give
such data, and "invalid choice: 'JSONL'")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.cli.main import main


@pytest.mark.parametrize("given", ["csv", "TSV"])
def test_a_tabular_format_is_told_to_write_json_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str) -> None:
    source = tmp_path / "users.csv"
    source.write_text("user,item\n1,apple\n")
    with pytest.raises(SystemExit) as ended:
        main(["data", "import", str(source), "--format", given, "--out", str(tmp_path / "d")])
    assert ended.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()[-1:]
    assert line == (f"fedhh data import: error: argument --format: no format reads columns "
                    f"('{given}'): write each user's items as one JSON array a line, a .jsonl "
                    "file, and give --format jsonl (docs/datasets.md, 'JSON lines')"), line
    assert not (tmp_path / "d").exists()


def test_a_format_in_capitals_is_the_format(tmp_path: Path) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text('["new york", "café"]\n["東京"]\n[]\n', encoding="utf-8")
    out = tmp_path / "d"
    assert main(["data", "import", str(source), "--format", "JSONL", "--out", str(out)]) == 0
    assert json.loads((out / "meta.json").read_text())["num_users"] == 3
