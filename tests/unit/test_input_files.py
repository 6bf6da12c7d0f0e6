"""Files read whole are read to a bound (``fedhh.input_files``): a path that never ends is one
line naming it, at the bound, not a process that reads until memory runs out."""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

import pytest

from fedhh import input_files
from fedhh.cli.main import main
from fedhh.data.text import user_lines
from fedhh.errors import ConfigError, DatasetError
from fedhh.input_files import read_whole
from fedhh.rpc.credentials import read_secret


def test_a_file_within_the_bound_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "list.txt"
    path.write_bytes(b"x" * 1024)
    assert read_whole(path, 1024, "item list") == b"x" * 1024


def test_a_file_past_the_bound_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "list.txt"
    path.write_bytes(b"x" * 1025)
    with pytest.raises(ConfigError, match=rf"^item list {path} holds more than 1 KiB; is it "
                                          r"the right file\?$"):
        read_whole(path, 1024, "item list")


def test_a_file_that_never_ends_is_read_to_the_bound() -> None:
    with pytest.raises(ConfigError, match=r"^the control token file /dev/zero holds more "
                                          r"than 64 KiB"):
        read_secret("/dev/zero", "FEDHH_CONTROL_TOKEN", "control token")


def test_a_secret_file_saved_with_a_byte_order_mark_reads_as_its_token(tmp_path: Path) -> None:
    """An editor that writes a UTF-8 byte-order mark (Notepad) made the token file
    'not printable ASCII text (byte 0xef)'; the mark is the file's, as every other input file's
    reader takes it. A byte-order mark inside the token is still refused."""
    token = "ab" * 20
    path = tmp_path / "admin-token"
    path.write_bytes(b"\xef\xbb\xbf" + token.encode() + b"\r\n")
    assert read_secret(path, "FEDHH_ADMIN_TOKEN", "admin token") == token.encode()
    path.write_bytes(token.encode() + b"\xef\xbb\xbf" + token.encode())
    with pytest.raises(ConfigError, match=r"not printable ASCII text \(it holds byte 0xef\)"):
        read_secret(path, "FEDHH_ADMIN_TOKEN", "admin token")


def test_a_deny_list_that_never_ends_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``fedhh admin start --deny-list /dev/zero`` died of a MemoryError at 881 MB
    under ``ulimit -v``; without a limit, the OOM killer."""
    with pytest.raises(SystemExit) as end:
        main(["simulate", "--deny-list", "/dev/zero"])
    assert end.value.code == 2
    assert capsys.readouterr().err == ("fedhh simulate: error: item list /dev/zero holds more "
                                       "than 256 MiB; is it the right file?\n")


@pytest.fixture
def pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A named pipe, waited on for a writer for 0.05 s."""
    monkeypatch.setattr(input_files, "PIPE_WRITER_WAIT_S", 0.05)
    path = tmp_path / "items.txt"
    os.mkfifo(path)
    return path


def _write_when_opened(path: Path, data: bytes) -> threading.Thread:
    """A writer of ``path`` (its open waits for the reader), then closing it."""
    def write() -> None:
        with open(path, "wb") as file:
            file.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def test_a_named_pipe_nobody_writes_to_is_refused_by_name(pipe: Path) -> None:
    """Before, opening it waited for a writer for ever: `fedhh admin --token-file fifo`,
    `fedhh simulate --dataset fifo.txt` and a service's token file hung without a word."""
    with pytest.raises(ConfigError, match=rf"^item list {pipe} is a named pipe \(FIFO\) that "
                                          r"no process wrote to within 0.05 s; give a file"):
        read_whole(pipe, 1024, "item list")


def test_a_dataset_pipe_nobody_writes_to_is_a_dataset_error(pipe: Path) -> None:
    with pytest.raises(DatasetError, match=rf"^text dataset {pipe} is a named pipe \(FIFO\)"):
        list(user_lines(pipe, "text", None))


def test_a_named_pipe_with_a_writer_is_read_as_before(pipe: Path) -> None:
    """Process substitution and a writer that opens the pipe as the command starts."""
    writer = _write_when_opened(pipe, b"a b\nc\n")
    assert read_whole(pipe, 1024, "item list") == b"a b\nc\n"
    writer.join()
    writer = _write_when_opened(pipe, b"a b\nc\n")
    assert list(user_lines(pipe, "text", None)) == [(1, "a b\n"), (2, "c\n")]
    writer.join()


def test_a_byte_that_comes_as_the_wait_runs_out_is_kept(
        pipe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read that tells a writer from none takes a byte when one came just then."""
    keep = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # (lets the writer open without waiting)
    writer = os.open(pipe, os.O_WRONLY)
    os.write(writer, b"first line\n")
    os.close(writer)
    monkeypatch.setattr(input_files, "_readable_within", lambda *_: False)
    try:
        assert read_whole(pipe, 1024, "item list") == b"first line\n"
    finally:
        os.close(keep)


def test_a_named_pipe_opened_past_descriptor_1023_is_waited_on(pipe: Path) -> None:
    """A process holding many descriptors (a service's connections) opens a file past 1023.
    Before, the wait for the pipe's writer was select's, which refuses such a descriptor:
    ValueError ("filedescriptor out of range in select()"), not the refusal naming the pipe."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"this process may hold {hard} descriptors, fewer than 1100")
    if soft != resource.RLIM_INFINITY and soft < 1100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1100, hard))
    held = []
    try:
        while not held or held[-1] < 1024:  # (each open takes the lowest free descriptor)
            held.append(os.open(os.devnull, os.O_RDONLY))
        os.close(held.pop())  # (the pipe's open takes it: every one below is held)
        with pytest.raises(ConfigError, match=rf"^item list {pipe} is a named pipe \(FIFO\)"):
            read_whole(pipe, 1024, "item list")
    finally:
        for descriptor in held:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_folder_is_refused_as_it_is_opened(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        input_files.open_input(tmp_path, "item list")
