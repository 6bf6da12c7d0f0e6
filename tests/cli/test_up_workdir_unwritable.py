"""`fedhh up --workdir` on a folder this user cannot write (a read-only mount, another user's
folder): one line naming the workdir and what to give. Before, "fedhh up: error: Permission
denied: /sys/fs/.fedhh-up.lock", naming neither the option nor a fix."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from cli_kit import one_line_error

from fedhh.rpc import topology


def test_an_unwritable_workdir_is_named_with_what_to_give(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    opened = os.open
    workdir = tmp_path / "read-only"
    workdir.mkdir()

    def refused(path: Any, *args: Any, **kwargs: Any) -> int:
        # (as a read-only mount or another user's folder answers; root passes a mode's check)
        if Path(path).parent == workdir:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(topology.os, "open", refused)
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.txt"
    users.write_text("apple pear\nfig\n" * 100)
    line = one_line_error(["up", "--dataset", str(users), "--workdir", str(workdir),
                           "--insecure"], capsys)
    assert line == (f"fedhh up: error: workdir {workdir} cannot be written: Permission denied; "
                    "give a folder this user can write (--workdir), or none for a temporary "
                    "one")
    assert list(workdir.iterdir()) == []
