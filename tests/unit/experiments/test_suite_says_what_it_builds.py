"""`fedhh experiments` says, on a terminal, that it builds its dataset on first use: the default
one takes over ten minutes, which were silent (the suite opened its datasets without progress)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from fedhh.experiments.runner import Suite
from fedhh.experiments.spec import SuiteSettings


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_suite_with_progress_says_it_builds_its_dataset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    Suite(SuiteSettings("shakespeare"), None, progress=True)
    assert f"building shakespeare into {tmp_path / 'cache'}" in err.getvalue()
    assert "(once; later runs read it from there)" in err.getvalue()


def test_the_experiments_command_asks_for_progress_unless_quiet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import fedhh.experiments.runner as runner
    from fedhh.cli.main import main

    asked: list[bool] = []

    class Stop(Exception):
        pass

    def suite(*args: object, progress: bool = False, **kwargs: object) -> None:
        asked.append(progress)
        raise Stop

    monkeypatch.setattr(runner, "Suite", suite)
    for quiet in ([], ["--quiet"]):
        with pytest.raises(Stop):
            main(["experiments", "segmentation", "--dry-run", *quiet])
    assert asked == [True, False]
