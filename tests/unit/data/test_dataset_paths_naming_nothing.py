"""A dataset path that names nothing to read says why: a symbolic link loop, a link to a file
that is gone, a folder in its path that is a file, a device or pipe where LEAF files are meant.
Before, each was said not to exist (``Path.exists`` is False for all of them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.data.leaf import leaf_files
from fedhh.data.registry import resolve_dataset_path
from fedhh.errors import DatasetError


def test_a_symbolic_link_loop_is_named_as_one(tmp_path: Path) -> None:
    (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")
    (tmp_path / "b.txt").symlink_to(tmp_path / "a.txt")
    with pytest.raises(DatasetError, match=rf"^{tmp_path}/a.txt cannot be read: Too many "
                                           r"levels of symbolic links$"):
        resolve_dataset_path(tmp_path / "a.txt", tmp_path / "cache")


def test_a_link_to_a_file_that_is_gone_names_its_target(tmp_path: Path) -> None:
    (tmp_path / "users.txt").symlink_to("moved.txt")
    with pytest.raises(DatasetError, match=rf"^{tmp_path}/users.txt is a symbolic link to "
                                           r"moved.txt, which does not exist$"):
        resolve_dataset_path(tmp_path / "users.txt", tmp_path / "cache")


def test_a_file_in_the_path_where_a_folder_is_meant(tmp_path: Path) -> None:
    (tmp_path / "users.txt").write_text("a b\n")
    with pytest.raises(DatasetError, match=r"users.txt/more.txt cannot be read: Not a "
                                           r"directory$"):
        resolve_dataset_path(tmp_path / "users.txt" / "more.txt", tmp_path / "cache")


def test_a_path_that_is_not_there_keeps_its_words(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nope.txt does not exist and is not a built-in "
                                           r"dataset \("):
        resolve_dataset_path(tmp_path / "nope.txt", tmp_path / "cache")


def test_leaf_input_that_is_neither_file_nor_folder(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "users.json")
    with pytest.raises(DatasetError, match=rf"^LEAF input {tmp_path}/users.json is neither a "
                                           r"file nor a folder$"):
        leaf_files(tmp_path / "users.json")


def test_data_import_names_the_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.txt").symlink_to(tmp_path / "a.txt")
    with pytest.raises(SystemExit) as end:
        main(["data", "import", str(tmp_path / "a.txt"), "--out", str(tmp_path / "out")])
    assert end.value.code == 2
    assert capsys.readouterr().err == (f"fedhh data import: error: PATH {tmp_path}/a.txt cannot "
                                       "be read: Too many levels of symbolic links\n")
