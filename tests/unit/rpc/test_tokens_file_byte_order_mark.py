"""An enrollment tokens file reads a leading UTF-8 byte-order mark as the file's (an editor's),
as every other input file's reader does (datasets, item lists, codebooks, LEAF files), for the
device's ``--enrollment-tokens-file`` and the coordinator's import alike. Before, such a file
was refused: "line 1: byte 1 of the line is not ASCII (0xef), so this is not a tokens file"."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.device_users import read_tokens
from fedhh_coordinator.enrollment import import_tokens, new_tokens
from fedhh_coordinator.store import Store

A, B = ("a" * 64, "b" * 64)


@pytest.mark.parametrize(("text", "tokens"), [
    (f"{A}\n\n{B}\n", {0: A, 2: B}),  # (line u for user u)
    (f"5 {A}\r\n9 {B}\r\n", {5: A, 9: B}),  # (a share, USER TOKEN; Windows line ends)
])
def test_a_device_tokens_file_with_a_byte_order_mark_reads_as_without(
        tmp_path: Path, text: str, tokens: dict[int, str]) -> None:
    path = tmp_path / "tokens.txt"
    path.write_bytes(codecs.BOM_UTF8 + text.encode())
    assert read_tokens(path) == tokens


def test_the_coordinator_imports_a_tokens_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "device-tokens.txt"
    tokens = new_tokens(2)
    path.write_bytes(codecs.BOM_UTF8 + "\n".join(tokens).encode() + b"\n")
    assert import_tokens(Store(tmp_path / "c.sqlite"), str(path)) == 2


def test_a_byte_not_ascii_is_placed_past_the_mark(tmp_path: Path) -> None:
    # (as not_utf8 places one in every other input file; and a mark not at the start is no
    # file's mark: still refused)
    path = tmp_path / "tokens"
    path.write_bytes(codecs.BOM_UTF8 + b"ab\xe9\n")
    with pytest.raises(ConfigError, match=r"tokens: line 1: byte 3 of the line is not ASCII "
                                          r"\(0xe9\), so"):
        read_tokens(path)
    path.write_bytes(A.encode() + b"\n" + codecs.BOM_UTF8 + B.encode() + b"\n")
    with pytest.raises(ConfigError, match=r"tokens: line 2: byte 1 of the line is not ASCII "
                                          r"\(0xef\), so"):
        read_tokens(path)
