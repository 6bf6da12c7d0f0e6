"""A compressed file of users (``users.txt.gz``, a ``.jsonl`` that is xz inside) is refused
naming what it is and the command line that reads it, through a pipe
(``fedhh.input_files.compressed_problem``). Before, ``fedhh simulate --dataset users.txt.gz``
said "unknown dataset file type '.gz'", and ``fedhh data import users.txt.gz --format text``
"line 1: not UTF-8 (byte 2 of the line: b'\\x8b' ...); save it as UTF-8": neither said that
the file is compressed, nor what to do."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path

import pytest

from fedhh.data.dataset import load_dataset
from fedhh.data.jsonl import import_jsonl
from fedhh.data.registry import resolve_dataset
from fedhh.data.text import import_text
from fedhh.errors import DatasetError

USERS = "apple pie\nbanana\n"


@pytest.mark.parametrize(("name", "tool", "form"), [
    ("users.txt.gz", "zcat", "text"), ("users.jsonl.bz2", "bzcat", "jsonl"),
    ("users.xz", "xzcat", "text|jsonl")])
def test_a_compressed_name_is_refused_with_the_pipe_that_reads_it(
        tmp_path: Path, name: str, tool: str, form: str) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(USERS.encode()))
    with pytest.raises(DatasetError) as refused:
        resolve_dataset(path, tmp_path / "cache")
    assert str(refused.value) == (
        f"{path}: it is {dict(zcat='gzip', bzcat='bzip2', xzcat='xz')[tool]}-compressed, which "
        f"fedhh does not read: give it through a pipe, as in `fedhh data import --format "
        f"{form} <({tool} {path}) --out DIR`, or decompressed to a file first")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(("compress", "kind", "tool"), [
    (gzip.compress, "gzip", "zcat"), (bz2.compress, "bzip2", "bzcat"),
    (lzma.compress, "xz", "xzcat")])
@pytest.mark.parametrize(("name", "read", "form"), [
    ("users.txt", import_text, "text"), ("users.jsonl", import_jsonl, "jsonl")])
def test_compressed_contents_are_told_by_their_first_bytes(
        tmp_path: Path, compress: object, kind: str, tool: str, name: str, read: object,
        form: str) -> None:
    path = tmp_path / name
    path.write_bytes(compress(USERS.encode()))  # type: ignore[operator]
    with pytest.raises(DatasetError) as refused:
        read(path, tmp_path / "ds")  # type: ignore[operator]
    assert str(refused.value) == (
        f"{path}: it is {kind}-compressed (by its first bytes), which fedhh does not read: "
        f"give it through a pipe, as in `fedhh data import --format {form} <({tool} {path}) "
        "--out DIR`, or decompressed to a file first")
    assert not (tmp_path / "ds").exists()


def test_text_that_begins_like_no_compressed_format_is_read(tmp_path: Path) -> None:
    # ("BZh" without bzip2's block magic, "PK" without its 03 04: words a user's first line
    # may begin with)
    path = tmp_path / "users.txt"
    path.write_text("BZh9 PK\nPKG\n", encoding="utf-8")
    assert load_dataset(import_text(path, tmp_path / "ds")).num_users == 2
