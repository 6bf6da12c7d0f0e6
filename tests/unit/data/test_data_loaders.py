"""Text and LEAF loaders: round trips through save/load, sharding, and malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _data_helpers import TINY_USERS, as_dicts

from fedhh.data import text as text_format
from fedhh.data.builder import ShardedBuilder
from fedhh.data.dataset import FederatedDataset, load_dataset
from fedhh.data.leaf import import_leaf
from fedhh.data.text import import_text, iter_text_users, write_text
from fedhh.errors import DatasetError


def test_text_round_trip(tmp_path: Path, tiny: FederatedDataset) -> None:
    text = write_text(tiny, tmp_path / "tiny.txt")
    lines = text.read_text(encoding="utf-8").split("\n")
    assert lines[1] == ""  # the user without items is a blank line
    loaded = load_dataset(import_text(text, tmp_path / "ds"))
    assert as_dicts(loaded) == TINY_USERS
    assert loaded.vocabulary == tiny.vocabulary


def test_text_format_details(tmp_path: Path) -> None:
    src = tmp_path / "users.txt"
    src.write_bytes("The cat  the\tCAT\r\n\n  \nnaïve café café".encode())
    plain = as_dicts(load_dataset(import_text(src, tmp_path / "plain")))
    assert plain == [{"The": 1, "cat": 1, "the": 1, "CAT": 1}, {}, {}, {"naïve": 1, "café": 2}]
    lower = as_dicts(load_dataset(import_text(src, tmp_path / "lower", lowercase=True)))
    assert lower[0] == {"the": 2, "cat": 2}


def test_text_byte_order_mark_is_not_an_item(tmp_path: Path) -> None:
    src = tmp_path / "bom.txt"
    src.write_bytes(b"\xef\xbb\xbfhello world\nhello \xef\xbb\xbfthere\n")
    users = as_dicts(load_dataset(import_text(src, tmp_path / "ds")))
    # the file's leading mark is an editor's; one inside a line is the item's own
    assert users == [{"hello": 1, "world": 1}, {"hello": 1, "\ufeffthere": 1}]


@pytest.mark.parametrize("shard_entries", [1, 2, 3, 1000])
def test_sharding_does_not_change_the_result(tmp_path: Path, shard_entries: int) -> None:
    users = [{"b": 1, "a": 2}, {"c": 5}, {}, {"a": 1, "d": 1, "b": 3}, {"e": 2, "a": 1}]
    with ShardedBuilder(tmp_path, shard_entries) as builder:
        for user in users:
            builder.add_user(user)
        path = builder.finish(tmp_path / "ds", name="s", provenance="p")
    ds = load_dataset(path)
    assert ds.vocabulary == ("a", "b", "c", "d", "e")
    assert as_dicts(ds) == users
    assert ds.stats["tokens"] == 16
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # scratch removed


def test_text_not_utf8_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.txt"
    src.write_bytes(b"fine words\nmore words\nbad \xff byte\n")
    target = tmp_path / "out"
    with pytest.raises(DatasetError, match=r"bad\.txt: line 3: not UTF-8"):
        import_text(src, target)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_text_line_without_end_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    # a file without line breaks (a binary file, /dev/zero) must not be read whole
    monkeypatch.setattr(text_format, "MAX_LINE_BYTES", 16)
    src = tmp_path / "blob.txt"
    src.write_bytes(b"fine line\n" + b"x" * 17 + b"\nmore\n")
    target = tmp_path / "out"
    with pytest.raises(DatasetError, match=r"blob\.txt: line 2 is longer than 16 bytes"):
        import_text(src, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.txt"]
    src.write_bytes(b"x" * 16 + b"\n")  # at the limit
    assert as_dicts(load_dataset(import_text(src, target))) == [{"x" * 16: 1}]


def test_text_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        import_text(tmp_path / "nope.txt", tmp_path / "out")


def _leaf(users: dict[str, list[object]]) -> dict[str, object]:
    return {
        "users": list(users),
        "num_samples": [len(x) for x in users.values()],
        "user_data": {u: {"x": x, "y": [{} for _ in x]} for u, x in users.items()},
    }


def test_leaf_comment_strings_and_sequences(tmp_path: Path) -> None:
    raw = _leaf({"1": ["i like it", "i like <url> too"]})
    seqs = _leaf({"2": [[["<BOS>", "hello", "world", "<EOS>", "<PAD>", "<PAD>"]],
                        [["<BOS>", "hello", "<EOS>", "<PAD>"]]]})
    (tmp_path / "a.json").write_text(json.dumps(raw))
    (tmp_path / "b.json").write_text(json.dumps(seqs))
    ds = load_dataset(import_leaf(tmp_path, tmp_path / "ds"))
    assert as_dicts(ds) == [{"i": 2, "like": 2, "it": 1, "<url>": 1, "too": 1},
                            {"hello": 2, "world": 1}]
    one = load_dataset(import_leaf(tmp_path / "a.json", tmp_path / "one"))
    assert one.num_users == 1


def test_a_leaf_file_may_start_with_a_byte_order_mark(tmp_path: Path) -> None:
    # (an editor's mark, as a text file's; before: "invalid JSON (Unexpected UTF-8 BOM)")
    (tmp_path / "a.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(_leaf({"1": ["hi"]})).encode())
    assert as_dicts(load_dataset(import_leaf(tmp_path / "a.json", tmp_path / "ds"))) == [
        {"hi": 1}]


def test_leaf_splits_merge_by_user(tmp_path: Path) -> None:
    for split, words in (("train", "a b"), ("val", "b c"), ("test", "c d")):
        (tmp_path / split).mkdir()
        data = _leaf({"u1": [words], "u2": ["z"]})
        (tmp_path / split / f"reddit_0_{split}.json").write_text(json.dumps(data))
    ds = load_dataset(import_leaf(tmp_path, tmp_path / "out" / "ds"))
    assert as_dicts(ds) == [{"a": 1, "b": 2, "c": 2, "d": 1}, {"z": 3}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"users": ["1"], "user_data": {"1": {"x": ["a"]}}', "line 1 column"),
        ("[1, 2]", "top level is a JSON array"),
        ('{"users": "1", "user_data": {}}', "'users' must be a list"),
        ('{"users": ["1"], "user_data": []}', "'user_data' must be an object"),
        ('{"users": ["1"], "user_data": {}}', r"user_data\['1'\] must be an object"),
        ('{"users": ["1"], "user_data": {"1": {"x": "abc"}}}', "with a list 'x'"),
        ('{"users": ["1"], "user_data": {"1": {"x": [["a", 3]]}}}', r"holds a JSON number \(3\)"),
        ('{"users": ["1", "1"], "user_data": {"1": {"x": []}}}', "listed twice"),
        ('{"users": ["1"], "num_samples": [1, 2], "user_data": {"1": {"x": []}}}',
         "num_samples"),
        ('{"users": ["1"], "user_data": {"1": {"x": ["ok \\ud83d cut"]}}}',
         "lone surrogate U\\+D83D"),
    ],
)
def test_malformed_leaf(tmp_path: Path, content: str, message: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(content)
    with pytest.raises(DatasetError, match=message) as info:
        import_leaf(src, tmp_path / "out")
    assert "bad.json" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_leaf_user_in_two_groups(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps(_leaf({"u": ["a"]})))
    (tmp_path / "y.json").write_text(json.dumps(_leaf({"u": ["b"]})))
    with pytest.raises(DatasetError, match="also appears in"):
        import_leaf(tmp_path, tmp_path / "out")


def test_leaf_not_utf8_and_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_bytes(b'{"users": ["\xff"]}')
    with pytest.raises(DatasetError, match="not UTF-8"):
        import_leaf(tmp_path / "bad.json", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"no .json files"):
        import_leaf(tmp_path / "empty", tmp_path / "out")


def test_a_text_file_of_bare_carriage_returns_is_refused(tmp_path: Path) -> None:
    """Before: `a b\\rc d\\re\\r` (classic Mac OS line ends) was one user holding every item."""
    src = tmp_path / "mac.txt"
    src.write_bytes(b"a b\rc d\re\r")
    with pytest.raises(DatasetError, match=r"lines end with \\r alone"):
        list(iter_text_users(src))
    src.write_bytes(b"a b\r\nc d\r\n")  # Windows line ends are lines
    assert [sorted(c) for c in iter_text_users(src)] == [["a", "b"], ["c", "d"]]


@pytest.mark.parametrize("content", [b"a\nb\rc\rd\re\n", b"a\rb\rc\n", b"x y\r\nz\rw\r\n"])
def test_a_bare_carriage_return_after_the_first_line_end_is_refused(
        tmp_path: Path, content: bytes) -> None:
    """Before: only a first line without \\n was checked, so `a\\nb\\rc\\rd\\re\\n` read as
    2 users, not 5, and the population the accounting counts on was wrong."""
    src = tmp_path / "mixed.txt"
    src.write_bytes(content)
    with pytest.raises(DatasetError, match=r"line \d holds a \\r that ends no line"):
        list(iter_text_users(src))


def test_a_utf16_text_file_is_named_as_such(tmp_path: Path) -> None:
    src = tmp_path / "u16.txt"
    src.write_text("a b\nc\n", encoding="utf-16")
    with pytest.raises(DatasetError, match=r"it is UTF-16 .*byte order mark FF FE"):
        list(iter_text_users(src))
