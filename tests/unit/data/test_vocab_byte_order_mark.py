"""A dataset folder's vocab.txt reads a leading byte-order mark as the file's encoding mark, as
every other input file's reader does (text and JSON-lines datasets, item lists, LEAF files;
Python's ``utf-8-sig``). Before, a vocab.txt saved again by an editor that writes one read its
first item as ``\\ufeffapple``, which no user's ``apple`` was, silently. A first item that
itself begins with U+FEFF is written after a mark, so it keeps its own."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.registry import resolve_dataset
from fedhh.errors import DatasetError

USERS = [{"apple": 2, "pear": 1}, {"apple": 1}]


def test_a_vocab_saved_with_a_byte_order_mark_reads_its_first_item_as_written(
        tmp_path: Path) -> None:
    root = save_dataset(from_user_counts(USERS), tmp_path / "ds")
    vocab = root / "vocab.txt"
    vocab.write_bytes(codecs.BOM_UTF8 + vocab.read_bytes())
    assert load_dataset(root).vocabulary == ("apple", "pear")


def test_a_byte_not_utf8_is_placed_past_the_mark(tmp_path: Path) -> None:
    root = save_dataset(from_user_counts(USERS), tmp_path / "ds")
    (root / "vocab.txt").write_bytes(codecs.BOM_UTF8 + b"appl\xe9\npear\n")
    with pytest.raises(DatasetError, match=r"line 1: not UTF-8 \(byte 5 of the line"):
        load_dataset(root)


# (sorted by code point, an item beginning with U+FEFF comes first where every other begins
# past it: emoji, fullwidth forms)
@pytest.mark.parametrize("users", [
    [{"\ufeffhello": 1, "\U0001f600": 2}],
    [{"\ufeff": 1}, {"\ufeff\ufeff": 1, "\uff41": 1}],
])
def test_a_first_item_beginning_with_u_feff_reads_back_as_written(
        tmp_path: Path, users: list[dict[str, int]]) -> None:
    dataset = from_user_counts(users)
    assert dataset.vocabulary[0].startswith("\ufeff")
    assert load_dataset(save_dataset(dataset, tmp_path / "ds")).vocabulary == dataset.vocabulary
    # (and through the importer's shards, which write and merge vocabularies of their own)
    source = tmp_path / "users.jsonl"
    source.write_text("".join(json.dumps(user) + "\n" for user in users), encoding="utf-8")
    imported = resolve_dataset(str(source), cache_dir=tmp_path / "cache")
    assert imported.vocabulary == dataset.vocabulary


def test_a_meta_json_saved_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    # (before: "meta.json: line 1 column 1: not valid JSON (Unexpected UTF-8 BOM ...)")
    root = save_dataset(from_user_counts(USERS), tmp_path / "ds")
    meta = root / "meta.json"
    meta.write_bytes(codecs.BOM_UTF8 + meta.read_bytes())
    assert load_dataset(root).vocabulary == ("apple", "pear")
