"""A file whose emoji are written as two UTF-16 surrogates each, in UTF-8's shape (CESU-8,
Java's modified UTF-8, a database's three-byte "utf8" export: ``😀`` as ED A0 BD ED B8 80,
where UTF-8 writes F0 9F 98 80), is refused naming the character and both writings, and a
surrogate alone as no character, by every reader of the user's files
(``fedhh.input_files.not_utf8``). Before, the error named the first byte alone
(``not UTF-8 (byte 3 of the line: b'\\xed')``) of a file every editor shows as text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedhh.data.jsonl import import_jsonl
from fedhh.data.leaf import import_leaf
from fedhh.data.text import import_text
from fedhh.data.wordlists import load_item_list
from fedhh.errors import DatasetError

CESU = bytes.fromhex("eda0bdedb880")  # (U+1F600 is the UTF-16 pair D83D DE00)
PAIR = ("the first of ED A0 BD ED B8 80: '\U0001f600' (U+1F600) written as two UTF-16 "
        "surrogates, as CESU-8 and Java's modified UTF-8 write it, where UTF-8 writes "
        "F0 9F 98 80")

READERS: list[tuple[Callable[[Path], Any], str, bytes, int]] = [
    (lambda path: import_text(path, path.parent / "new"), "users.txt",
     b"a b\nok " + CESU + b"\n", 4),
    (lambda path: import_jsonl(path, path.parent / "new"), "users.jsonl",
     b'["a"]\n["ok", "' + CESU + b'"]\n', 9),
    (lambda path: import_leaf(path, path.parent / "new"), "users.json",
     b'{"users": ["u"], "num_samples": [1],\n "user_data": {"u": {"x": ["' + CESU
     + b'"], "y": [0]}}}', 29),
    (load_item_list, "deny.txt", b"a\n" + CESU + b"\n", 1),
]


@pytest.mark.parametrize(("read", "name", "data", "byte"), READERS,
                         ids=[name for _, name, _, _ in READERS])
def test_an_emoji_written_as_two_surrogates_is_named(
        tmp_path: Path, read: Callable[[Path], Any], name: str, data: bytes,
        byte: int) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DatasetError) as caught:
        read(path)
    assert str(caught.value) == (f"{path}: line 2: not UTF-8 (byte {byte} of the line: "
                                 f"b'\\xed', {PAIR}); save it as UTF-8")
    assert [p.name for p in tmp_path.iterdir()] == [name]  # (nothing made)


@pytest.mark.parametrize(("data", "said"), [
    (b"\xed\xb8\x80", "the first of ED B8 80: the surrogate U+DE00 alone"),  # (a low half)
    (b"\xed\xa0\xbdx", "the first of ED A0 BD: the surrogate U+D83D alone"),  # (a high half)
    (b"\xed\xa0\xbd\xed\xa0\xbd", "the first of ED A0 BD: the surrogate U+D83D alone"),
])
def test_a_surrogate_alone_is_no_character(tmp_path: Path, data: bytes, said: str) -> None:
    path = tmp_path / "deny.txt"
    path.write_bytes(b"a\n" + data + b"\n")
    with pytest.raises(DatasetError) as caught:
        load_item_list(path)
    assert str(caught.value) == (f"{path}: line 2: not UTF-8 (byte 1 of the line: b'\\xed', "
                                 f"{said}, which is no character); save it as UTF-8")
