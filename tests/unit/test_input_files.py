"""Files read whole are read to a bound (``fedhh.input_files``): a path that never ends is one
line naming it, at the bound, not a process that reads until memory runs out."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.errors import ConfigError
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
