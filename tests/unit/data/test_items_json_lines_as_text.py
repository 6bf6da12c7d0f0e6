"""A JSON-lines dataset given as text (``users.txt``, ``--format text``) is refused, naming its
line and the way to import it: read as text, it became items such as ``["new`` and
``york",``, silently. Text whose lines only look like JSON is read as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.data.dataset import load_dataset
from fedhh.data.text import import_text
from fedhh.errors import DatasetError


@pytest.mark.parametrize(("text", "line"), [
    ('["new york", "東京"]\n{"a": 2}\n', 1),
    ('\ufeff\n\n{"new york": 3, "👍🏽": 1}\n', 3),  # (a mark, blank lines: users without items)
    ('["a","b"]\n', 1),
])
def test_json_lines_given_as_text_are_refused(tmp_path: Path, text: str, line: int) -> None:
    source = tmp_path / "users.txt"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=f"line {line} is a JSON user") as caught:
        import_text(source, tmp_path / "ds")
    assert "--format jsonl" in str(caught.value)
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("text", [
    "{ } [ ]\n",  # code tokens
    "[] {}\n",
    '{"a": "b"}\n',  # (not counts)
    "[1, 2]\n",
    "[x] y\n",
    'the cat\n["a", "b"]\n',  # (only the first line with items is looked at)
])
def test_text_that_only_looks_like_json_is_read_as_text(tmp_path: Path, text: str) -> None:
    source = tmp_path / "users.txt"
    source.write_text(text, encoding="utf-8")
    dataset = load_dataset(import_text(source, tmp_path / "ds"))
    assert set(dataset.vocabulary) == set(text.split())
