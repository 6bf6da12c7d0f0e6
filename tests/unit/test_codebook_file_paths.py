"""A ``--codec`` path that names no codebook file says what is wrong with it, as a dataset path
does: a folder, a symbolic link loop, a link to a file that is gone, a file where a folder is
meant, a missing ``.json``; a name that is no built-in codebook still lists the built-in ones.
A named pipe is read as the item lists read one. Before, each was "neither a built-in codebook
nor a codebook JSON file", and a pipe with a writer was refused the same way."""

from __future__ import annotations

import os
import threading
from importlib import resources
from pathlib import Path

import pytest

from fedhh import input_files
from fedhh.cli.main import main
from fedhh.codec import codec_spec
from fedhh.errors import ConfigError

BOOK = resources.files("fedhh.codec").joinpath("books", "unicode.json").read_text(
    encoding="utf-8")


def test_a_folder_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"^codebook file {tmp_path} is a folder; give the "
                                          r"codebook JSON file$"):
        codec_spec(str(tmp_path))


def test_a_symbolic_link_loop_is_named_as_one(tmp_path: Path) -> None:
    (tmp_path / "book.json").symlink_to(tmp_path / "book.json")
    with pytest.raises(ConfigError, match=rf"^codebook file {tmp_path}/book.json cannot be "
                                          r"read: Too many levels of symbolic links$"):
        codec_spec(str(tmp_path / "book.json"))


def test_a_link_to_a_file_that_is_gone_names_its_target(tmp_path: Path) -> None:
    (tmp_path / "book.json").symlink_to("moved.json")
    with pytest.raises(ConfigError, match=rf"^codebook file {tmp_path}/book.json is a symbolic "
                                          r"link to moved.json, which does not exist$"):
        codec_spec(str(tmp_path / "book.json"))


def test_a_file_in_the_path_where_a_folder_is_meant(tmp_path: Path) -> None:
    (tmp_path / "books").write_text("")
    with pytest.raises(ConfigError, match=r"books/book.json cannot be read: Not a directory$"):
        codec_spec(str(tmp_path / "books" / "book.json"))


@pytest.mark.parametrize("written", ["/nonexistent/book.json", "book.json", "Book.JSON"])
def test_a_missing_file_is_said_not_to_exist(written: str) -> None:
    with pytest.raises(ConfigError, match=rf"^codebook file {written} does not exist$"):
        codec_spec(written)


def test_a_name_that_is_not_built_in_lists_the_built_in_ones() -> None:
    with pytest.raises(ConfigError, match=r"^codebook 'englsh' is neither a built-in codebook "
                                          r"\(unicode, general, .*\) nor a codebook JSON file$"):
        codec_spec("englsh")


def test_a_named_pipe_with_a_writer_is_read(tmp_path: Path) -> None:
    """`--codec <(cat book.json)`: the shell gives a pipe that its writer holds open."""
    path = tmp_path / "book.json"
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(BOOK)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert codec_spec(str(path)) == codec_spec("unicode")
    writer.join()


def test_a_named_pipe_nobody_writes_to_is_refused_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(input_files, "PIPE_WRITER_WAIT_S", 0.05)
    path = tmp_path / "book.json"
    os.mkfifo(path)
    with pytest.raises(ConfigError, match=rf"^codebook file {path} is a named pipe \(FIFO\) "
                                          r"that no process wrote to within 0.05 s"):
        codec_spec(str(path))


def test_the_command_line_says_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "book.json").symlink_to("moved.json")
    with pytest.raises(SystemExit) as end:
        main(["simulate", "--codec", str(tmp_path / "book.json")])
    assert end.value.code == 2
    assert capsys.readouterr().err.endswith(f"{tmp_path}/book.json is a symbolic link to "
                                            "moved.json, which does not exist\n")
