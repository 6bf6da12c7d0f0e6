"""A deny list can name every item a dataset can hold: a ``.json`` item list is one JSON array
of strings, each exact, so an item of a JSON-lines dataset that begins or ends with a space
(``" lead"``, shown ``\\x20lead`` on the console) can be denied; the one-a-line form refuses
such a line (an editor hides the space) and now says how to name it. Before, no deny list
could name it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.codec import Codec
from fedhh.data.wordlists import load_item_list
from fedhh.errors import DatasetError

ITEMS = [" lead", "trail ", "a\tb", "\ufeffbom", "\u200eשלום", "new york", " "]


def test_json_list_keeps_items_exact(tmp_path: Path) -> None:
    path = tmp_path / "deny.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(ITEMS + ITEMS[:2]).encode())
    items = load_item_list(path)
    assert items == ITEMS  # (exact, in order, repeats kept once, the file's BOM dropped)
    # each denies its own code alone: the codes differ from the stripped items'
    codec = Codec.from_spec("unicode", 200)
    assert len(set(codec.encode_many(items).codes.tolist())) == len(ITEMS)
    assert codec.encode(" lead") != codec.encode("lead")


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": 1}', "one JSON array of strings, not an object"),
    ('"a"', "not a string"),
    ("3", "not a number"),
    ('["a", ""]', 'line 1: element 2 ("") is empty'),
    # (JSON's names, not Python's: before, "element 1 (7) is a int, not a string")
    ('["a", 7]', "line 1: element 2 (7) is a JSON number, not a string"),
    ('["a", 7.5]', "line 1: element 2 (7.5) is a JSON number, not a string"),
    ('["a", null]', "line 1: element 2 (null) is a JSON null, not a string"),
    ('["a", true]', "line 1: element 2 (true) is a JSON boolean, not a string"),
    ('["a", ["b"]]', 'line 1: element 2 (["b"]) is a JSON array, not a string'),
    ('["a", {"b": 1}]', 'line 1: element 2 ({"b": 1}) is a JSON object, not a string'),
    ('["a\\nb"]', "holds a line break"),
    ('["a", ', "not JSON"),
])
def test_json_list_refuses_what_is_not_an_item(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "deny.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=r"deny\.json") as error:
        load_item_list(path)
    assert message in str(error.value)


def test_line_list_points_to_the_json_form(tmp_path: Path) -> None:
    path = tmp_path / "deny.txt"
    path.write_text("ok\n lead\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="line 2") as error:
        load_item_list(path)
    assert "JSON array of strings in a .json file" in str(error.value)
