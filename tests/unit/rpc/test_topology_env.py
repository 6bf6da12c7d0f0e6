"""A local topology's workdir serves one topology at a time, and its children import the code
its caller imports: they run in the workdir, so a relative PYTHONPATH entry
(``PYTHONPATH=.:server:aggregator:device``, as the docs' load-test commands have it) must reach
them made absolute, or they would import whatever fedhh is installed instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
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


def test_a_workdir_serves_one_topology_at_a_time(tmp_path: Path) -> None:
    """A second `fedhh up` in the same workdir rewrote the first's tokens and keys and shared
    its store (the first's run failed): it is refused, naming the holder, until the first
    ends."""
    with LocalTopology(workdir=tmp_path / "work", tls=False):
        token = (tmp_path / "work" / "admin.token").read_bytes()
        with pytest.raises(ConfigError, match=rf"in use by another fedhh up .*pid {os.getpid()}"):
            LocalTopology(workdir=tmp_path / "work", tls=False)
        assert (tmp_path / "work" / "admin.token").read_bytes() == token
    with LocalTopology(workdir=tmp_path / "work", tls=False):
        pass


def test_a_workdir_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match=r"afile is a file, not a folder"):
        LocalTopology(workdir=tmp_path / "afile", tls=False)


def test_close_stops_every_service_whatever_its_name(tmp_path: Path) -> None:
    """Before, close() stopped services by name (devices*, selector-i, the coordinator, ...):
    a selector started under another name was left running, orphaned."""
    from fedhh.rpc.topology import Service

    topo = LocalTopology(workdir=tmp_path / "work", tls=False)
    for name in ("s1", "worker-0"):
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        topo.services[name] = Service(name, [], tmp_path / f"{name}.log", None, process)
    topo.close()
    assert all(s.process is not None and s.process.poll() is not None
               for s in topo.services.values())
