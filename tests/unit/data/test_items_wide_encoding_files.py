"""A file saved as UTF-16 (Windows' "Unicode", PowerShell 5's ``>``) is refused saying so, by
every reader of items: text, JSON lines, LEAF and item lists, with a byte order mark or
without one. Before, without the mark, a text file's characters were read as items holding NUL
(``a\\x00``), an item list's as deny-list items that match nothing, and JSON lines were "not
JSON"; an item list or LEAF file with the mark was "not UTF-8 (byte 0 ...)". UTF-32, with its mark
or without, is refused the same way by them and by a dataset folder's vocab.txt (before, a
text file's characters were read as items holding three NULs, and one with the little-endian
mark, FF FE 00 00, was called UTF-16). UTF-8 files that hold NUL in their items are read as
before."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from fedhh.data.dataset import load_dataset
from fedhh.data.jsonl import import_jsonl
from fedhh.data.leaf import import_leaf
from fedhh.data.text import import_text
from fedhh.data.wordlists import load_item_list
from fedhh.errors import DatasetError

LEAF = '{"users": ["u"], "num_samples": [1], "user_data": {"u": {"x": ["a b"], "y": [0]}}}'


def _import(kind: str, source: Path, out: Path) -> list[str]:
    if kind == "list":
        return load_item_list(source)
    reader = {"txt": import_text, "jsonl": import_jsonl, "json": import_leaf}[kind]
    return list(load_dataset(reader(source, out)).vocabulary)


@pytest.mark.parametrize(("kind", "text"), [
    ("txt", "a b\nc\n"),
    ("jsonl", '["a", "b"]\n["c"]\n'),
    ("json", LEAF),
    ("list", "a\nb\n"),  # (one character a line: the whole beginning is looked at)
])
@pytest.mark.parametrize(("encoding", "said"), [
    ("utf-16", "it is UTF-16 (it starts with the byte order mark FF FE)"),
    ("utf-16-le", "it looks UTF-16LE without a byte order mark"),
    ("utf-16-be", "it looks UTF-16BE without a byte order mark"),
    ("utf-32", "it is UTF-32 (it starts with the byte order mark FF FE 00 00)"),
    ("utf-32-be-marked", "it is UTF-32 (it starts with the byte order mark 00 00 FE FF)"),
    ("utf-32-le", "it looks UTF-32LE without a byte order mark"),
    ("utf-32-be", "it looks UTF-32BE without a byte order mark"),
])
def test_wide_encodings_are_refused_saying_so(tmp_path: Path, kind: str, text: str,
                                              encoding: str, said: str) -> None:
    source = tmp_path / f"users.{'txt' if kind == 'list' else kind}"
    source.write_bytes(_encoded(text, encoding))
    with pytest.raises(DatasetError) as caught:
        _import(kind, source, tmp_path / "ds")
    assert str(caught.value).startswith(f"{source}: {said}"), caught.value
    assert "is UTF-8: save it so" in str(caught.value)
    assert not (tmp_path / "ds").exists()


def _encoded(text: str, encoding: str) -> bytes:
    if encoding == "utf-32-be-marked":  # (Python's "utf-32" writes the machine's order)
        return codecs.BOM_UTF32_BE + text.encode("utf-32-be")
    return text.encode(encoding)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "utf-32-le",
                                      "utf-32-be"])
def test_a_dataset_vocabulary_saved_wide_is_refused_saying_so(tmp_path: Path,
                                                              encoding: str) -> None:
    root = import_text(_written(tmp_path / "users.txt", "b a\nc\n"), tmp_path / "ds")
    vocab = root / "vocab.txt"
    vocab.write_bytes(vocab.read_text(encoding="utf-8").encode(encoding))
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    assert str(caught.value).startswith(f"{vocab}: it "), caught.value
    assert "a dataset's vocab.txt is UTF-8: save it so" in str(caught.value)


def test_utf32_is_told_from_utf16_holding_cjk(tmp_path: Path) -> None:
    # (UTF-16 of a CJK character then a line end pairs into a plane-10 code point, unassigned:
    # not UTF-32; it is read as the bytes it is, not UTF-8)
    source = tmp_path / "users.txt"
    source.write_bytes("中\n文\n".encode("utf-16-le"))
    with pytest.raises(DatasetError, match="line 2: not UTF-8"):
        import_text(source, tmp_path / "ds")


def _written(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("kind", "text", "items"), [
    ("txt", "a\x00b c\x00\n", {"a\x00b", "c\x00"}),
    ("jsonl", '["a\\u0000", "b"]\n', {"a\x00", "b"}),
    ("list", "x\x00\n", ["x\x00"]),
])
def test_utf8_items_holding_nul_are_read_as_before(tmp_path: Path, kind: str, text: str,
                                                   items: object) -> None:
    source = tmp_path / f"users.{'txt' if kind == 'list' else kind}"
    source.write_bytes(text.encode("utf-8"))
    got = _import(kind, source, tmp_path / "ds")
    assert (set(got) if isinstance(items, set) else got) == items


def test_bytes_that_are_not_utf8_are_counted_from_one(tmp_path: Path) -> None:
    source = tmp_path / "users.txt"
    source.write_bytes(b"a\nc \xff d\n")
    with pytest.raises(DatasetError, match=r"line 2: not UTF-8 \(byte 3 of the line: b'\\xff', "):
        import_text(source, tmp_path / "ds")
    listed = tmp_path / "deny.txt"
    listed.write_bytes(b"ok\n\xffx\n")
    with pytest.raises(DatasetError, match=r"line 2: not UTF-8 \(byte 1 of the line: b'\\xff', "):
        load_item_list(listed)


def test_json_lines_joined_with_their_byte_order_marks(tmp_path: Path) -> None:
    # (`cat a.jsonl b.jsonl`, each saved with a mark: before, line 2 was "not JSON:
    # Unexpected UTF-8 BOM (decode using utf-8-sig)"); the mark is outside the JSON value, so
    # it is no item's, and one inside a string is kept
    source = tmp_path / "users.jsonl"
    source.write_bytes(b'\xef\xbb\xbf["a"]\n\xef\xbb\xbf["b", "\\ufeffc"]\n')
    assert set(_import("jsonl", source, tmp_path / "ds")) == {"a", "b", "\ufeffc"}


def test_text_lines_joined_with_their_byte_order_marks_are_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (`cat a.txt b.txt`, each saved with a mark: the second's begins line 2, where it is
    # kept, as an item may begin with U+FEFF (fedhh's own write_text writes such lines), so
    # its first item is another than the file shows; before, nothing said so)
    source = tmp_path / "users.txt"
    source.write_bytes(b"\xef\xbb\xbfa b\n\xef\xbb\xbfa c\nd\n\xef\xbb\xbfe\n")
    with caplog.at_level("WARNING", logger="fedhh.data.text"):
        root = import_text(source, tmp_path / "ds")
    assert set(load_dataset(root).vocabulary) == {"a", "b", "\ufeffa", "c", "d", "\ufeffe"}
    said = [r.getMessage() for r in caplog.records if "byte-order mark" in r.getMessage()]
    assert said == ["users.txt: 2 lines after the first begin with a byte-order mark (U+FEFF), "
                    "as a file joined after another (cat) brings at its start (the first, "
                    "line 2: its item '\\ufeffa'); it is kept as part of the item, another item "
                    "than the one without it: remove it if it is a joined file's"]
    stats = json.loads((root / "meta.json").read_text(encoding="utf-8"))["stats"]
    assert stats["lines_beginning_with_byte_order_mark"] == {
        "count": 2, "first": "line 2", "item": "\ufeffa"}
