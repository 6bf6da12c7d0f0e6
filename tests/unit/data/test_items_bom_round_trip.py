"""An item that begins with U+FEFF (a zero-width no-break space, as data scraped from files
holds) survives being written first in a text dataset or an item list: the readers drop one
byte-order mark at the start of a file, an editor's, which took the item's own (``\\ufeffhello``
read back ``hello``, so a written deny list denied another item)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.data.dataset import from_user_counts, load_dataset
from fedhh.data.text import import_text, write_text
from fedhh.data.wordlists import load_item_list, write_item_list

MARKED = "\ufeffhello"


@pytest.mark.parametrize("items", [[MARKED, "x"], ["\ufeff\ufeff", MARKED], ["x", MARKED],
                                   ["hello", "x"]])
def test_item_lists_read_back_as_written(tmp_path: Path, items: list[str]) -> None:
    path = write_item_list(items, tmp_path / "deny.txt")
    assert load_item_list(path) == items
    assert path.read_bytes().startswith(b"\xef\xbb\xbf") == items[0].startswith("\ufeff")


@pytest.mark.parametrize("users", [
    [{MARKED: 2, "a": 1}, {"b": 1}],
    [{}, {MARKED: 1}],  # (a first user without items: a blank first line)
    [{"\ufeff": 1}], [{MARKED: 1}, {"a": 1}],
    [{"plain": 1}, {MARKED: 1}],
])
def test_text_datasets_read_back_as_written(tmp_path: Path, users: list[dict[str, int]]) -> None:
    dataset = from_user_counts(users)
    text = write_text(dataset, tmp_path / "users.txt")
    loaded = load_dataset(import_text(text, tmp_path / "ds"))
    assert loaded.vocabulary == dataset.vocabulary
    for user in range(dataset.num_users):
        assert [arr.tolist() for arr in loaded.user_items(user)] == [
            arr.tolist() for arr in dataset.user_items(user)]
