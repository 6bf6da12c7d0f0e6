"""A local topology's children import the code its caller imports: they run in the topology's
workdir, so a relative PYTHONPATH entry (``PYTHONPATH=.:server:aggregator:device``, as the docs'
load-test commands have it) must reach them made absolute, or they would import whatever fedhh
is installed instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedhh.rpc.topology import LocalTopology


def test_children_import_from_the_callers_relative_pythonpath(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "caller_marker.py").write_text("WHERE = 'the caller'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["code", "", str(tmp_path / "elsewhere")]))
    topo = LocalTopology(workdir=tmp_path / "work", tls=False)
    assert topo.env["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "code"), str(tmp_path), str(tmp_path / "elsewhere")]
    child = subprocess.run(
        [sys.executable, "-c", "import caller_marker; print(caller_marker.WHERE)"],
        env=topo.env, cwd=topo.workdir, capture_output=True, text=True, timeout=60, check=True)
    assert child.stdout.strip() == "the caller"
