"""A JSON-lines file whose lines end with \\r alone (classic Mac OS) is refused naming its line
ends, as a text dataset is. Before: "line 1: not JSON: Extra data (column 11)", then advice to
write one JSON array of every user a user a line, which the file was not."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.data.jsonl import import_jsonl
from fedhh.errors import DatasetError


@pytest.mark.parametrize("data", [b'["apple"]\r["pear"]\r', b'{"a": 1}\r\r{"b": 2}'])
def test_bare_carriage_returns_are_named(tmp_path: Path, data: bytes) -> None:
    source = tmp_path / "users.jsonl"
    source.write_bytes(data)
    with pytest.raises(DatasetError) as error:
        import_jsonl(source, tmp_path / "out")
    assert str(error.value) == (
        f"{source}: its lines end with \\r alone (classic Mac OS line ends); a JSON-lines "
        "dataset has one user per line, each ending with \\n or \\r\\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("data", [b'["apple"]\r\n["pear"]\r\n', b'["apple"]\r', b'["a"]'])
def test_other_line_ends_read_as_before(tmp_path: Path, data: bytes) -> None:
    source = tmp_path / "users.jsonl"
    source.write_bytes(data)
    import_jsonl(source, tmp_path / "out")
