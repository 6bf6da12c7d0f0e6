"""dockerkit.Project.containers lists a compose service's containers with one `docker ps` on
the labels compose sets (project, service, not a one-off `compose run`), not with a compose CLI
process per call. The `docker` and compose CLIs here are stand-ins that record their calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from dockerkit import Project


def test_containers_are_listed_by_label_without_the_compose_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(
        f'#!/bin/sh\necho "docker $*" >> "{calls}"\n'
        'printf "p_selector_2\\np_selector_1\\n"\n')
    (bin_dir / "compose").write_text(f'#!/bin/sh\necho "compose $*" >> "{calls}"\nexit 1\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    project = Project(["compose"], "fedhhtestab12", [tmp_path / "compose.yml"], {})
    assert project.containers("selector") == ["p_selector_1", "p_selector_2"]
    assert calls.read_text().splitlines() == [
        "docker ps --all --format {{.Names}} "
        "--filter label=com.docker.compose.project=fedhhtestab12 "
        "--filter label=com.docker.compose.service=selector "
        "--filter label=com.docker.compose.oneoff=False"]
