"""A JSON-lines file whose lines end with \\r alone (classic Mac OS) is refused naming its line
ends, as a text dataset is. Before: "line 1: not JSON: Extra data (column 11)", then advice to
write one JSON array of every user a user a line, which the file was not. So is a line of a
file of \\n line ends that holds a \\r ending a user, as a text dataset's is."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_helpers import import_refused

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


@pytest.mark.parametrize(("text", "line"), [('["apple"]\r["pear"]\n', 1),
                                            ('["a"]\n{"b": 1}\r{"c": 2}\r\n', 2)])
def test_a_bare_carriage_return_among_line_feeds_is_named(tmp_path: Path, text: str,
                                                          line: int) -> None:
    # (a file edited on two systems: JSON reads the \r as a space, so the two users it ends
    # were one line's two values; before, "not JSON: Extra data (column 10)" and advice on
    # files of one JSON array of every user)
    source = tmp_path / "users.jsonl"
    assert import_refused(import_jsonl, source, text) == (
        f"{source}: line {line} holds a \\r that ends no line (\\r\\n does); a JSON-lines "
        "dataset has one user per line, each ending with \\n or \\r\\n, so this line's users "
        "would be read as one")


def test_a_carriage_return_inside_a_value_reads_as_before(tmp_path: Path) -> None:
    # (JSON's whitespace between an array's elements: one user, as before)
    source = tmp_path / "users.jsonl"
    source.write_bytes(b'["apple",\r "pear"]\n["fig"]\n')
    import_jsonl(source, tmp_path / "out")
