"""Every position a dataset or item-list error names is counted from 1, as an editor counts
lines and columns: a JSON-lines item (before, ``line 2: item 1 (3)`` for the second item of
line 2), a .json item list's element, now with the line it begins on (before, ``element 1``
and no line, in a list written one element a line), and a JSON syntax error in a .json item
list or a dataset's meta.json (before, Python's ``line 1 column 6 (char 5)``, the third
position counted from 0), and an item ``write_item_list`` refuses, now with the file it was
to write (before, ``item 0`` for the first, and no file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.jsonl import import_jsonl
from fedhh.data.wordlists import load_item_list, write_item_list
from fedhh.errors import DatasetError


@pytest.mark.parametrize(("line", "said"), [
    ('["a", 3]', 'item 2 (3) is a JSON number, not a string; an item is a JSON string: "3"'),
    ('["a", "b", ""]', "item 3 ('') is empty"),
    ('{"a": 1, "b": 0}', "item 2 ('b'): its count must be an integer from 1 to 4,294,967,295, "
                         "got 0"),
])
def test_a_json_lines_item_is_counted_from_one(tmp_path: Path, line: str, said: str) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text(f'["x"]\n{line}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        import_jsonl(source, tmp_path / "ds")
    assert str(caught.value) == f"{source}: line 2: {said}"
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(("text", "nth", "line", "shown"), [
    (json.dumps(["a", "b", 7, "c"], indent=2), 3, 4, "7"),  # (json.dump's indent=2)
    ('[ "a" ,\n\n "b", "c\\n",\r\n "d"]', 3, 3, '"c\\n"'),  # (blank lines, two a line)
    ('\n  ["", "a"]', 1, 2, '""'),
])
def test_a_json_item_list_names_the_element_and_its_line(tmp_path: Path, text: str, nth: int,
                                                         line: int, shown: str) -> None:
    path = tmp_path / "deny.json"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(DatasetError) as caught:
        load_item_list(path)
    assert str(caught.value).startswith(f"{path}: line {line}: element {nth} ({shown}) ")


def test_a_json_item_list_that_is_not_json_names_its_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "deny.json"
    path.write_text('[\n  "a",\n  b\n]', encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_item_list(path)
    assert str(caught.value).startswith(f"{path}: line 3 column 3: not JSON (Expecting value); ")
    assert "char" not in str(caught.value)


def test_a_meta_json_that_is_not_json_names_its_line_and_column(tmp_path: Path) -> None:
    root = save_dataset(from_user_counts([{"a": 1}]), tmp_path / "ds")
    meta = root / "meta.json"
    lines = meta.read_text(encoding="utf-8").replace('"format"', "format", 1).splitlines()
    meta.write_text("\n".join(lines), encoding="utf-8")
    line = next(number for number, text in enumerate(lines, start=1) if "format" in text)
    column = lines[line - 1].index("format") + 1
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    assert str(caught.value) == (f"{root}/meta.json: line {line} column {column}: not valid "
                                 "JSON (Expecting property name enclosed in double quotes)")


@pytest.mark.parametrize("name", ["deny.txt", "deny.json"])
def test_an_item_that_cannot_be_written_is_counted_from_one_and_names_the_file(
        tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    with pytest.raises(DatasetError) as caught:
        write_item_list(["a", "b", ""], out)
    assert str(caught.value) == f"{out}: item 3 ('') is empty"
    with pytest.raises(DatasetError) as caught:
        write_item_list(["a\nb"], out)
    assert str(caught.value).startswith(f"{out}: item 1 ('a\\nb') holds a line break")
    assert not out.exists()
