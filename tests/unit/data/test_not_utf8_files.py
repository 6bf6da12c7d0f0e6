"""A file saved as Latin-1 or Windows-1252 where UTF-8 is meant (an older Windows or Mac
editor's default, Excel's "CSV") is refused by every reader of the user's files naming the
file, the line, the byte counted from 1 in its line, what the byte is in those encodings, and
the fix (``fedhh.input_files.not_utf8``). Before, the message named the byte alone
(``not UTF-8 (byte 4 of the line: b'\\xe9')``), the LEAF, JSON item list and codebook readers
named no line (``not UTF-8 at byte 49``), and those that drop a UTF-8 byte-order mark counted
past it: a file with the mark was said to fail 3 bytes early, at the wrong byte."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedhh.codec import codec_spec
from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.jsonl import import_jsonl
from fedhh.data.leaf import import_leaf
from fedhh.data.text import import_text
from fedhh.data.wordlists import load_item_list
from fedhh.errors import ConfigError, DatasetError

CAFE = "caf\xe9"  # (é is E9 in Latin-1 and Windows-1252, and no UTF-8 on its own)
LATIN1 = ("(byte {} of the line: b'\\xe9', which Latin-1 and Windows-1252 read as 'é'); save it "
          "as UTF-8")


def _leaf(word: str) -> str:
    return ('{"users": ["u"], "num_samples": [1],\n'
            f' "user_data": {{"u": {{"x": ["{word}"], "y": [0]}}}}}}')


def _vocab(path: Path, dataset: Path) -> Any:
    (dataset / "vocab.txt").write_bytes(path.read_bytes())
    return load_dataset(dataset)


# (reader, file name, text: the é on line 2 at the byte given, counted from 1 in its line)
READERS: list[tuple[Callable[[Path, Path], Any], str, str, int]] = [
    (lambda path, ds: import_text(path, ds.parent / "new"), "users.txt",
     f"a b\n{CAFE} au lait\n", 4),
    (lambda path, ds: import_jsonl(path, ds.parent / "new"), "users.jsonl",
     f'["a"]\n["{CAFE}"]\n', 6),
    (lambda path, ds: import_leaf(path, ds.parent / "new"), "users.json", _leaf(CAFE), 32),
    (lambda path, ds: load_item_list(path), "deny.txt", f"a\n{CAFE}\n", 4),
    (lambda path, ds: load_item_list(path), "deny.json", f'["a",\n "{CAFE}"]', 6),
    (_vocab, "vocab.txt", f"a\n{CAFE}\n", 4),
]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return save_dataset(from_user_counts([{"a": 1}], name="ds"), tmp_path / "ds")


@pytest.mark.parametrize(("read", "name", "text", "byte"), READERS,
                         ids=[name for _, name, _, _ in READERS])
def test_a_latin1_file_is_named_with_its_line_byte_and_fix(
        tmp_path: Path, dataset: Path, read: Callable[[Path, Path], Any], name: str, text: str,
        byte: int) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DatasetError) as caught:
        read(path, dataset)
    where = dataset / "vocab.txt" if name == "vocab.txt" else path
    assert str(caught.value) == f"{where}: line 2: not UTF-8 {LATIN1.format(byte)}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ds", name])  # (nothing made)


def test_a_latin1_meta_json_is_named_so(dataset: Path) -> None:
    meta = dataset / "meta.json"
    text = meta.read_text(encoding="utf-8")
    line = text.splitlines().index('  "name": "ds",') + 1
    meta.write_bytes(text.replace('"name": "ds"', f'"name": "{CAFE}"').encode("latin-1"))
    with pytest.raises(DatasetError) as caught:
        load_dataset(dataset)
    assert str(caught.value) == f"{meta}: line {line}: not UTF-8 {LATIN1.format(15)}"


@pytest.mark.parametrize(("read", "name", "text"), [
    (lambda path: import_text(path, path.parent / "new"), "users.txt", f"{CAFE}\n"),
    (lambda path: import_leaf(path, path.parent / "new"), "users.json",
     _leaf(CAFE).replace(",\n", ",")),
    (load_item_list, "deny.json", f'["{CAFE}"]'),
    (lambda path: codec_spec(str(path)), "book.json", f'{{"name": "{CAFE}"}}'),
], ids=["text", "leaf", "json-list", "codebook"])
def test_a_byte_order_mark_is_not_counted_in_the_first_line(
        tmp_path: Path, read: Callable[[Path], Any], name: str, text: str) -> None:
    """(as an editor shows the line: before, the LEAF and codebook readers named the byte 3
    before the one, b'c' for the é of café, in a file that began with the mark)"""
    path = tmp_path / name
    path.write_bytes(codecs.BOM_UTF8 + text.encode("latin-1"))
    with pytest.raises((DatasetError, ConfigError)) as caught:
        read(path)
    said = f"{path}: line 1: not UTF-8 {LATIN1.format(text.index(CAFE[-1]) + 1)}"
    assert str(caught.value) in (said, f"codebook file {said}")


@pytest.mark.parametrize(("data", "said"), [
    # (Windows-1252's own characters, 80 to 9F: curly quotes, the euro)
    (b"a\n\x93quoted\x94\n", "(byte 1 of the line: b'\\x93', which Windows-1252 reads as '“')"),
    (b"a\nprice \x80\n", "(byte 7 of the line: b'\\x80', which Windows-1252 reads as '€')"),
    # (a byte no encoding of the two reads: named alone)
    (b"a\nx\x81\n", "(byte 2 of the line: b'\\x81')"),
    # (UTF-8's shape, cut short or damaged: not taken for Latin-1 text)
    (b"a\nx\xe2\x82\n", "(byte 2 of the line: b'\\xe2')"),
    # (an encoded surrogate: named so, test_encoded_surrogates_named.py)
    (b"a\n\xed\xa0\x80\n", "(byte 1 of the line: b'\\xed', the first of ED A0 80: the "
                          "surrogate U+D800 alone, which is no character)"),
])
def test_what_the_byte_is_is_said_where_an_encoding_reads_it(tmp_path: Path, data: bytes,
                                                             said: str) -> None:
    path = tmp_path / "deny.txt"
    path.write_bytes(data)
    with pytest.raises(DatasetError) as caught:
        load_item_list(path)
    assert str(caught.value) == f"{path}: line 2: not UTF-8 {said}; save it as UTF-8"
