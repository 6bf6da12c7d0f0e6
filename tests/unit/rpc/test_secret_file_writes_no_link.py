"""A secret file is written through a temporary file of its own making (``write_private``):
a symbolic link left at the temporary's name (``.NAME.tmp``) is not followed. Before, the
secret was written over the file the link named, and the renamed link made the secret's path
name that file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fedhh.rpc.credentials import write_private


def test_a_link_at_the_temporary_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious\n")
    (tmp_path / ".admin.token.tmp").symlink_to(victim)
    write_private(tmp_path / "admin.token", "secret\n")
    assert victim.read_text() == "precious\n"
    written = tmp_path / "admin.token"
    assert not written.is_symlink() and written.read_text() == "secret\n"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["admin.token", "elsewhere.txt"]


def test_a_stale_temporary_is_replaced(tmp_path: Path) -> None:
    stale = tmp_path / ".key.tmp"
    stale.write_text("half a secret")
    os.chmod(stale, 0o644)
    write_private(tmp_path / "key", "whole\n")
    assert (tmp_path / "key").read_text() == "whole\n"
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o600
    assert not stale.exists()
