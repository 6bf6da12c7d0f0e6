"""`fedhh up --workdir` (and a load test's) a folder that cannot be made is refused naming the
workdir and what to do. Before, the bare OSError reached the user: "fedhh up: error: Not a
directory: /tmp/afile/sub", naming neither the option nor the remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.topology import LocalTopology


def test_a_workdir_under_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("kept\n")
    with pytest.raises(ConfigError, match=r"^workdir \S+/afile/sub cannot be made: Not a "
                                          r"directory; give a folder"):
        LocalTopology(tmp_path / "afile" / "sub", tls=False)
    assert (tmp_path / "afile").read_text() == "kept\n"


def test_a_workdir_whose_parent_is_missing_is_refused_and_nothing_made(tmp_path: Path) -> None:
    """Only the workdir itself is made. Before, every missing folder was, so a typo in a
    parent (`--workdir runs/demoo/w`) started a fresh store, keys and device budgets there
    instead of reusing the workdir meant."""
    workdir = tmp_path / "typo" / "w"
    with pytest.raises(ConfigError, match=(
            f"^--workdir {workdir}: the folder {workdir.parent} does not exist; only the last "
            "folder of the path is made \\(a mistyped path would start afresh beside the "
            "earlier workdir: a new store, keys and device budgets\\)")):
        LocalTopology(workdir, tls=False)
    assert list(tmp_path.iterdir()) == []


def test_a_workdir_in_an_existing_folder_is_made(tmp_path: Path) -> None:
    topo = LocalTopology(tmp_path / "w", tls=False)
    try:
        assert (tmp_path / "w" / "coordinator-signing.pem").is_file()
    finally:
        topo.close()
