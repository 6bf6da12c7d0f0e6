"""An item list (``--deny-list``) written as JSON but read one item a line is refused. Before,
``deny.jsonl`` holding ``["a"]`` and ``["ab"]``, or ``deny.txt`` holding the one line
``["a", "ab"]`` (``json.dump(items, f)``), was read one item a line: it denied the items
``["a"]`` and ``["a", "ab"]``, brackets and quotes included, which no user holds, and let
``a`` and ``ab`` through, silently. Lines that only look like JSON are items as before. And
`write_item_list` writes what `load_item_list` reads back for the name it is given: before,
``fedhh data warm-start --out warm.json`` wrote one item a line, which ``--deny-list
warm.json`` refused as not JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.data.wordlists import load_item_list, write_item_list
from fedhh.errors import DatasetError


@pytest.mark.parametrize("text", ['["a"]\n["ab"]\n', '"a"\n"ab"\n', "a\nab\n"])
def test_a_jsonl_item_list_is_refused(tmp_path: Path, text: str) -> None:
    source = tmp_path / "deny.jsonl"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match="not JSON lines") as caught:
        load_item_list(source)
    assert str(source) in str(caught.value)
    assert "a file named .json" in str(caught.value)


@pytest.mark.parametrize("text", ['["a", "ab"]\n', '["a"]\n["ab"]\n', '\ufeff{"a": 1}\n',
                                  '  ["a"]\nab\n'])
def test_an_item_list_whose_first_line_is_json_is_refused(tmp_path: Path, text: str) -> None:
    source = tmp_path / "deny.txt"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match="line 1 is JSON") as caught:
        load_item_list(source)
    assert "a file named .json" in str(caught.value)


@pytest.mark.parametrize(("text", "items"), [
    ("[x]\n", ["[x]"]),
    ("{}\n[]\n", ["{}", "[]"]),
    ("[1, 2]\n", ["[1, 2]"]),
    ('["a"] b\n', ['["a"] b']),
    ('{"a": "b"}\n', ['{"a": "b"}']),
    ('"a"\n', ['"a"']),
    ('a\n["b"]\n', ["a", '["b"]']),  # (only the first line is looked at, as a dataset's)
])
def test_lines_that_only_look_like_json_are_items(tmp_path: Path, text: str,
                                                  items: list[str]) -> None:
    source = tmp_path / "deny.txt"
    source.write_text(text, encoding="utf-8")
    assert load_item_list(source) == items


def test_the_same_items_as_a_json_array_are_read(tmp_path: Path) -> None:
    source = tmp_path / "deny.json"
    source.write_text('["a", "ab"]\n', encoding="utf-8")
    assert load_item_list(source) == ["a", "ab"]


@pytest.mark.parametrize("items", [["the", "you"], [" new york", "\ufeffword", '["a"]', "é"]])
def test_an_item_list_written_as_json_reads_back(tmp_path: Path, items: list[str]) -> None:
    path = write_item_list(items, tmp_path / "warm.json")
    assert load_item_list(path) == items


def test_an_item_list_is_not_written_where_it_would_not_read_back(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not JSON lines"):
        write_item_list(["the"], tmp_path / "warm.jsonl")
    with pytest.raises(DatasetError, match=r"item 1 .* would read back as JSON"):
        write_item_list(['["a"]', "b"], tmp_path / "warm.txt")
    assert not list(tmp_path.iterdir())
    path = write_item_list(["b", '["a"]'], tmp_path / "warm.txt")  # (not first: read so)
    assert load_item_list(path) == ["b", '["a"]']
