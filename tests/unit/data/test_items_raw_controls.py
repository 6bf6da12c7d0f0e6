"""A JSON-lines user whose item holds a raw control character (a tab, NUL, ESC written into the
string unescaped, which JSON does not allow) is refused naming the character, its column and
how JSON writes it (before: "not JSON: Invalid control character at (column 4)", followed by
advice on files of one JSON array that did not apply); the escaped form of the same item is
read whole. Such a file named ``.txt`` is refused as the JSON lines it is (before, it was
imported as the text items ``["a`` and ``b"]``). A dataset folder's ``vocab.txt`` holding bytes
that are not UTF-8 is refused naming the line, as its other defects are (before, "position
2"); its ``\\r\\n`` line ends are read as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.jsonl import import_jsonl
from fedhh.data.leaf import import_leaf
from fedhh.data.text import import_text
from fedhh.data.wordlists import load_item_list
from fedhh.errors import DatasetError


@pytest.mark.parametrize(("raw", "named"), [
    ("\t", "a raw tab (\\x09)"),
    ("\x00", "a raw control character (\\x00)"),
    ("\x1b", "a raw control character (\\x1b)"),
    ("\r", "a raw carriage return (\\x0d)"),
])
def test_raw_control_in_a_string_is_named(tmp_path: Path, raw: str, named: str) -> None:
    source = tmp_path / "users.jsonl"
    message = import_refused(import_jsonl, source, f'["ok"]\n["a{raw}b", "c"]\n')
    assert message.startswith(f"{source}: line 2: not JSON: {named} inside a string "
                              "(column 4); "), message
    assert "json.dumps" in message and "one JSON array" not in message
    assert raw not in message  # (the message itself holds no raw control character)


def test_escaped_controls_are_items(tmp_path: Path) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text('["a\\tb", "x\\u0000y", "\\u001b[31m"]\n', encoding="utf-8")
    dataset = load_dataset(import_jsonl(source, tmp_path / "ds"))
    assert sorted(dataset.vocabulary) == sorted(["a\tb", "x\x00y", "\x1b[31m"])


def test_json_lines_with_a_raw_tab_given_as_text_are_refused(tmp_path: Path) -> None:
    message = import_refused(import_text, tmp_path / "users.txt", '["a\tb", "c"]\n["d"]\n')
    assert "line 1 is a JSON user" in message


def test_vocabulary_not_utf8_names_its_line(tmp_path: Path) -> None:
    root = save_dataset(from_user_counts([{"a": 1, "b": 2}, {"c": 1}]), tmp_path / "ds")
    vocab = root / "vocab.txt"
    assert vocab.read_bytes() == b"a\nb\nc\n"
    vocab.write_bytes(b"a\r\nb\r\nc\r\n")  # (read as before: \r\n is a line end)
    assert load_dataset(root).vocabulary == ("a", "b", "c")
    vocab.write_bytes(b"a\nb\nc\xed\xa0\x80\n")  # (a surrogate's bytes, on line 3)
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    assert str(caught.value) == (f"{vocab}: line 3: not UTF-8 (byte 2 of the line: b'\\xed', "
                                 "the first of ED A0 80: the surrogate U+D800 alone, which is "
                                 "no character); save it as UTF-8")


def test_raw_control_in_a_leaf_file_is_named(tmp_path: Path) -> None:
    # (before: "invalid JSON (Invalid control character at)")
    source = tmp_path / "leaf.json"
    message = import_refused(
        import_leaf, source, '{"users": ["u"], "user_data": {"u": {"x": ["a\x1bb"], "y": [0]}}}')
    assert message == (
        f"{source}: line 1 column 46: invalid JSON: a raw control character (\\x1b) inside a "
        "string; JSON holds a control character only escaped, as json.dumps writes it (\\t, "
        "\\u0000)")


def test_raw_control_in_a_json_item_list_is_named(tmp_path: Path) -> None:
    # (before: "not JSON (Invalid control character at: line 1 column 4 (char 3))")
    listed = tmp_path / "deny.json"
    listed.write_text('["ok",\n "a\tb"]', encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_item_list(listed)
    assert str(caught.value) == (
        f"{listed}: line 2 column 4: not JSON: a raw tab (\\x09) inside a string; JSON holds "
        "a control character only escaped, as json.dumps writes it (\\t, \\u0000)")
    listed.write_text('["ok",\n "a\\tb"]', encoding="utf-8")
    assert load_item_list(listed) == ["ok", "a\tb"]


def test_lowercase_merging_past_the_largest_count_names_the_line(tmp_path: Path) -> None:
    # (before: "an item count of 4294967296 exceeds 2^32 - 1", from the builder)
    source = tmp_path / "users.jsonl"
    message = import_refused(import_jsonl, source, '["b"]\n{"A": 4294967295, "b": 1, "a": 1}\n',
                             lowercase=True)
    assert message == (f"{source}: line 2: --lowercase makes 'A', 'a' one item, 'a', "
                       "whose count, their sum, is above 4,294,967,295")
    assert load_dataset(import_jsonl(source, tmp_path / "kept")).num_users == 2  # (as written)
