"""A codebook JSON file (``--codec book.json``) saved with a UTF-8 byte-order mark, as editors
on Windows save one, is read as the item lists and datasets are, the mark dropped (before:
"not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)"); one saved as UTF-16 is
refused saying so, as is one saved as UTF-32 (before, called UTF-16 with the mark, and
not UTF-8 without it), and bytes that are not UTF-8 are named (before: Python's decoder's
words)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from fedhh.codec import codec_spec
from fedhh.errors import ConfigError

BOOK = resources.files("fedhh.codec").joinpath("books", "unicode.json").read_text(
    encoding="utf-8")


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    plain, marked = tmp_path / "plain.json", tmp_path / "marked.json"
    plain.write_text(BOOK, encoding="utf-8")
    marked.write_text(BOOK, encoding="utf-8-sig")
    assert codec_spec(str(marked)) == codec_spec(str(plain))


@pytest.mark.parametrize(("data", "said"), [
    (BOOK.encode("utf-16"), "it is UTF-16 (it starts with the byte order mark FF FE); a "
                            "codebook is UTF-8: save it so"),
    (BOOK.encode("utf-16-le"), "it looks UTF-16LE without a byte order mark"),
    (BOOK.encode("utf-32"), "it is UTF-32 (it starts with the byte order mark FF FE 00 00); "
                            "a codebook is UTF-8: save it so"),
    (BOOK.encode("utf-32-be"), "it looks UTF-32BE without a byte order mark"),
    (b'{"name": "x\xff"}', "line 1: not UTF-8 (byte 12 of the line: b'\\xff', which "
                            "Latin-1 and Windows-1252 read as 'ÿ'); save it as UTF-8"),
])
def test_other_encodings_are_refused_saying_so(tmp_path: Path, data: bytes, said: str) -> None:
    path = tmp_path / "book.json"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        codec_spec(str(path))
    assert str(caught.value).startswith(f"codebook file {path}: {said}"), caught.value
