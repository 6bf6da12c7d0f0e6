"""Items that hold spaces (``new york``, ``1 000``, a no-break space): the JSON-lines format,
the dataset format's version 2, and datasets given by a ``.jsonl`` path.

Before, no input format could carry such an item: the text format split it at the space, and
the dataset format, the item lists and `from_user_counts` refused it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _data_helpers import as_dicts, fingerprint

from fedhh.codec import BUILTIN_NAMES, Codec
from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.jsonl import import_jsonl, iter_jsonl_users, write_jsonl
from fedhh.data.registry import resolve_dataset, source_format
from fedhh.data.text import write_text
from fedhh.errors import DatasetError

SPACED = ["new york", " lead", "trail ", "1 000", "san\u00a0francisco", "東京\u3000駅",
          "tab\there", "how  to"]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_jsonl_carries_any_item_and_blank_lines_are_users(tmp_path: Path) -> None:
    source = _write(tmp_path / "users.jsonl", [
        json.dumps([*SPACED, "new york"]),
        "",
        json.dumps({"new york": 3, "how to": 1}),
        "[]",
        "{}",
        "   ",
    ])
    users = [dict(u) for u in iter_jsonl_users(source)]
    assert users[0] == {**dict.fromkeys(SPACED, 1), "new york": 2}
    assert users[1:] == [{}, {"new york": 3, "how to": 1}, {}, {}, {}]
    dataset = load_dataset(import_jsonl(source, tmp_path / "ds"))
    assert dataset.num_users == 6 and as_dicts(dataset) == users
    assert set(SPACED) <= set(dataset.vocabulary)
    assert dataset.stats["source_format"] == "jsonl"
    meta = json.loads((tmp_path / "ds" / "meta.json").read_text())
    assert meta["version"] == 2  # (an item holds whitespace)


def test_jsonl_crlf_bom_and_lowercase(tmp_path: Path) -> None:
    source = tmp_path / "u.jsonl"
    source.write_bytes(b'\xef\xbb\xbf["New York", "new york"]\r\n{"HOW TO": 2}\r\n')
    assert [dict(u) for u in iter_jsonl_users(source, lowercase=True)] == [
        {"new york": 2}, {"how to": 2}]
    assert [dict(u) for u in iter_jsonl_users(source)] == [
        {"New York": 1, "new york": 1}, {"HOW TO": 2}]


@pytest.mark.parametrize(("line", "message"), [
    ('["a", ', "line 2: not JSON"),
    ("new york", "line 2: not JSON"),
    ('"new york"', "line 2: a JSON string; each line is one user"),
    ("42", "line 2: a JSON number"),
    ("null", "line 2: a JSON null"),
    ('["a", 3]', r"line 2: item 2 \(3\) is a JSON number, not a string"),
    ('["a", ["b"]]', r'line 2: item 2 \(\["b"\]\) is a JSON array, not a string'),
    ('["a", ""]', r"line 2: item 2 \(''\) is empty"),
    (r'["a", "new\nyork"]', r"item 2 .* holds a line break \(\\n\)"),
    (r'["x\r"]', r"item 1 .* holds a line break \(\\r\)"),
    (r'["x\u2028y"]', r"item 1 .* holds a line break \(\\u2028\)"),
    (r'["ok", "\ud800"]', r"item 2 .* holds a lone surrogate \(\\ud800\)"),
    (r'{"\udfff": 1}', r"item 1 .* lone surrogate"),
    ('{"a": 0}', r"item 1 \('a'\): its count must be an integer from 1 to 4,294,967,295, got 0"),
    ('{"a": -1}', "got -1"),
    ('{"a": 1.0}', "got 1.0"),
    ('{"a": true}', "got true$"),  # (as the file writes it: before, Python's True)
    ('{"a": "2"}', "got '2'$"),
    # (a record: before, only "item 0 ('user'): its count must be ..., got '7'")
    ('{"user": "7", "items": ["a", "b"]}', r"item 1 \('user'\): its count must be .*, got '7'; "
     r"an object is one user's item counts, not a record: to give the items under 'items', "
     r"write that array alone on the line"),
    ('{"a": null}', "got null$"),
    ('{"a": {"b": 1}}', r'got \{"b": 1\};'),
    ('{"a": 4294967296}', "got 4294967296"),
    ('{"a": NaN}', "not JSON: NaN is not a JSON number"),
    ('{"a": 1, "b": 2, "a": 3}', r"item 3 \('a'\) is a key given before in this object"),
    ('["a"] ["b"]', "not JSON: Extra data"),
])
def test_jsonl_errors_name_file_line_and_item(tmp_path: Path, line: str, message: str) -> None:
    source = _write(tmp_path / "bad.jsonl", ['["fine"]', line])
    with pytest.raises(DatasetError, match=message) as caught:
        list(iter_jsonl_users(source))
    assert str(caught.value).startswith(f"{source}: line 2")
    target = save_dataset(from_user_counts([{"kept": 1}]), tmp_path / "ds")
    before = fingerprint(target)
    with pytest.raises(DatasetError, match=message):
        import_jsonl(source, target)
    assert fingerprint(target) == before  # a refused import changes nothing


def test_jsonl_file_level_errors(tmp_path: Path) -> None:
    source = tmp_path / "u.jsonl"
    source.write_bytes(b'["ok"]\n["\xff"]\n')
    with pytest.raises(DatasetError, match="line 2: not UTF-8"):
        list(iter_jsonl_users(source))
    source.write_bytes('["a"]\n'.encode("utf-16"))
    with pytest.raises(DatasetError, match="UTF-16"):
        list(iter_jsonl_users(source))
    with pytest.raises(DatasetError, match="cannot read JSON-lines dataset"):
        list(iter_jsonl_users(tmp_path / "missing.jsonl"))
    _write(source, ["", "[]"])
    with pytest.raises(DatasetError, match="none of its 2 users holds an item"):
        import_jsonl(source, tmp_path / "ds", require_items=True)
    assert not (tmp_path / "ds").exists()


def test_dataset_version_2_round_trips_spaces_exactly(tmp_path: Path) -> None:
    users = [dict.fromkeys(SPACED, 2), {"new york": 1, "new york ": 5}, {}]
    path = save_dataset(from_user_counts(users), tmp_path / "ds")
    assert json.loads((path / "meta.json").read_text())["version"] == 2
    assert as_dicts(load_dataset(path)) == users
    plain = save_dataset(from_user_counts([{"a": 1, "b": 2}]), tmp_path / "plain")
    # (no item holds whitespace: written as version 1, as before, so older fedhh reads it)
    assert json.loads((plain / "meta.json").read_text())["version"] == 1
    assert write_jsonl(load_dataset(path), tmp_path / "back.jsonl")
    assert [dict(u) for u in iter_jsonl_users(tmp_path / "back.jsonl")] == users
    with pytest.raises(DatasetError, match=r"holds whitespace.*JSON lines"):
        write_text(load_dataset(path), tmp_path / "back.txt")
    assert not (tmp_path / "back.txt").exists()


@pytest.mark.parametrize(("vocab", "version", "message"), [
    ("a b\nc\n", 1, r"line 1: item 'a b' is empty or contains whitespace \(format version 1"),
    ("a\n\n", 2, "line 2: item '' is empty"),
    ("a\x0bb\nc d\n", 2, r"line 1: .* line break \(\\x0b\)"),
    ("a b\na b\n", 2, "line 2: item 'a b' is repeated"),
])
def test_loading_a_vocabulary_validates_by_version(tmp_path: Path, vocab: str, version: int,
                                                   message: str) -> None:
    path = save_dataset(from_user_counts([{"x y": 1, "z": 1}]), tmp_path / "ds")
    meta = json.loads((path / "meta.json").read_text())
    (path / "vocab.txt").write_bytes(vocab.encode())
    meta["version"] = version
    (path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=message) as caught:
        load_dataset(path)
    assert str(path / "vocab.txt") in str(caught.value)


@pytest.mark.parametrize(("version", "message"), [
    (3, "format version 3, expected 1 or 2; it was written by a newer fedhh"),
    (True, "format version True, expected 1 or 2$"),
    ("2", "format version '2', expected 1 or 2$"),
])
def test_unknown_versions_are_refused(tmp_path: Path, version: object, message: str) -> None:
    path = save_dataset(from_user_counts([{"z": 1}]), tmp_path / "ds")
    meta = json.loads((path / "meta.json").read_text())
    meta["version"] = version
    (path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=message):
        load_dataset(path)


def test_a_vocabulary_with_crlf_line_ends_reads_as_before(tmp_path: Path) -> None:
    path = save_dataset(from_user_counts([{"x y": 1, " z": 1}]), tmp_path / "ds")
    (path / "vocab.txt").write_bytes(b" z\r\nx y\r\n")
    assert load_dataset(path).vocabulary == (" z", "x y")


def test_from_user_counts_names_the_defect() -> None:
    assert from_user_counts([{"new york": 1}]).vocabulary == ("new york",)
    with pytest.raises(DatasetError, match=r"item 'a\\nb' holds a line break"):
        from_user_counts([{"a\nb": 1}])
    with pytest.raises(DatasetError, match="is empty"):
        from_user_counts([{"": 1}])


def test_a_jsonl_path_is_a_dataset(tmp_path: Path) -> None:
    source = _write(tmp_path / "q.JSONL", [json.dumps(["new york", "how to"])] * 3)
    assert source_format(source) == "jsonl"
    dataset = resolve_dataset(source, tmp_path / "cache")
    assert dataset.vocabulary == ("how to", "new york") and dataset.num_users == 3
    assert dataset.root is not None and "-jsonl-" in dataset.root.name
    with pytest.raises(DatasetError, match=r"expected .txt \(text format\), .jsonl"):
        source_format(_write(tmp_path / "q.csv", ["a"]))


@pytest.mark.parametrize("item", [*SPACED, " ", "\u3000", "a\u00a0", "\u2009b"])
def test_items_with_spaces_encode_and_decode_whole(item: str) -> None:
    """The codec encodes an item's UTF-8 bytes, a space's among them: unchanged by this."""
    for name in BUILTIN_NAMES:
        codec = Codec(name, 1024)
        length = len(codec.book.item_bits(item))
        decoded = codec.decode(codec.prefix(codec.encode(item), length), length)
        assert (decoded.text, decoded.ended) == (item, True)
