"""`fedhh up --workdir`'s service tokens (control, admin, selector) are written as the other
secrets are (``write_private``): a new file renamed into place. Before, each was written into
the file found at its name: through a symbolic link put there, over the file it named, and
into a file of mode 0644, readable by all."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fedhh.rpc.topology import LocalTopology


def test_a_rerun_writes_its_tokens_as_new_files(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious\n")
    (work / "admin.token").symlink_to(victim)
    (work / "control.token").write_text("an earlier token")
    os.chmod(work / "control.token", 0o644)
    with LocalTopology(work, tls=False):
        pass
    assert victim.read_text() == "precious\n"
    for name in ("control", "admin", "selector"):
        token = work / f"{name}.token"
        assert not token.is_symlink() and len(token.read_text()) == 48, name
        assert stat.S_IMODE(token.stat().st_mode) == 0o600, name
