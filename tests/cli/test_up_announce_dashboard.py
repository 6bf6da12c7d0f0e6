"""`fedhh up --dashboard` names the `fedhh admin` line that reaches its coordinator while the
stack stays up. Before, it printed the dashboard's address alone: the coordinator's gRPC port
was in the workdir's coordinator.ready.json only, and the README's admin commands name the
compose stack's."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedhh.cli import up


def _topo(workdir: Path) -> SimpleNamespace:
    return SimpleNamespace(workdir=workdir,
                           services={"coordinator": SimpleNamespace(ready={"dashboard_port": 9})},
                           address=lambda name: {"coordinator": "127.0.0.1:7000"}[name])


def _environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_path: bool) -> Path:
    """A virtualenv's bin folder holding this interpreter and its `fedhh` script, on PATH or
    not (the README runs `.venv/bin/fedhh` without activating the environment)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "fedhh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", str(bin_dir) if on_path else str(tmp_path / "elsewhere"))
    return script


@pytest.mark.parametrize("secure, transport", [
    (True, "--ca '/w d/tls/ca.pem'"), (False, "--insecure")])
def test_the_admin_line_names_the_coordinator_its_transport_and_token(
        secure: bool, transport: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _environment(tmp_path, monkeypatch, on_path=True)
    up.announce_dashboard(_topo(Path("/w d")), secure)
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"admin: fedhh admin --coordinator 127.0.0.1:7000 {transport} --token-file "
        "'/w d/admin.token' list (or status, results RUN: `fedhh admin --help`)")


def test_the_admin_line_runs_where_fedhh_is_not_on_path(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the line began `fedhh admin` whatever ran it: after `python3 bootstrap.py up
    --dashboard` or `.venv/bin/fedhh up --dashboard`, with the environment not activated, the
    line copied into another shell said "fedhh: command not found". It names the script."""
    script = _environment(tmp_path, monkeypatch, on_path=False)
    up.announce_dashboard(_topo(Path("/w")), True)
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        f"admin: {script} admin --coordinator 127.0.0.1:7000 --ca /w/tls/ca.pem")
