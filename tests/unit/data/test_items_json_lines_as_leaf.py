"""A JSON-lines dataset named ``.json`` (or imported with ``--format leaf``) is read as LEAF:
the error says it reads as JSON lines and how to import it, where it said only "line 2
column 1: invalid JSON (Extra data)". A file that is not JSON lines keeps its error."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.data.leaf import import_leaf
from fedhh.errors import DatasetError

HINT = "it reads as JSON lines, one user a line"


@pytest.mark.parametrize("text", [
    '{"new york": 2, "👍🏽": 1}\n["東京", "cafe\\u0301"]\n',  # two users: "Extra data"
    '["東京", "مرحبا"]\n',  # one user: a list at the top level
    '{"new york": 2}\n',  # one user: an object without "users"
    '\ufeff\n  ["a"]\n["b"]\n',  # a mark, a blank line first
])
def test_json_lines_given_as_leaf_say_so(tmp_path: Path, text: str) -> None:
    source = tmp_path / "users.json"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=HINT) as caught:
        import_leaf(source, tmp_path / "ds")
    assert "--format jsonl" in str(caught.value) and str(source) in str(caught.value)
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(("text", "error"), [
    ('{"users": 3}', "'users' must be a list of strings"),
    ('{"users": ["a"],\n"user_data": x}', "line 2 column 14: invalid JSON"),
    ('{"users": ["a"], "user_data": {}}\n{"x": 1}\n', "invalid JSON (Extra data)"),
    ('"a"\n"b"\n', "invalid JSON (Extra data)"),
])
def test_other_broken_leaf_files_keep_their_errors(tmp_path: Path, text: str,
                                                   error: str) -> None:
    source = tmp_path / "users.json"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=r".*") as caught:
        import_leaf(source, tmp_path / "ds")
    assert error in str(caught.value) and HINT not in str(caught.value)
