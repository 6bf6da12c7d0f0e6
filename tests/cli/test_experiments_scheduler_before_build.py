"""`fedhh experiments --scheduler ADDRESS` on a dataset not built yet asks the scheduler first.

Before, the dataset was built (over 10 minutes for the default one, without a word) and only
then was a wrong or unreachable address told. A built dataset is still opened first, so that a
suite the store holds whole needs no scheduler (docs/experiments.md).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from cli_kit import one_line_error

from fedhh.cli import experiments as experiments_cli
from fedhh.experiments import populations


def test_an_unreachable_scheduler_is_told_before_the_dataset_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))  # (nothing built there)
    assert not populations.built("synthetic-reddit-small")
    built: list[str] = []

    def resolve(name: str) -> None:
        built.append(name)
        raise AssertionError(f"{name} was built before the scheduler was asked")

    monkeypatch.setattr(populations, "resolve", resolve)
    monkeypatch.setattr(experiments_cli, "CONNECT_S", 0.5, raising=False)
    with socket.socket() as closed:  # a port of the OS's choice that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    line = one_line_error(
        ["experiments", "segmentation", "--dataset", "synthetic-reddit-small", "--seeds", "1",
         "--store", str(tmp_path / "store"), "--out", str(tmp_path / "report"),
         "--scheduler", f"tcp://127.0.0.1:{port}"], capsys)
    assert line.startswith("fedhh experiments segmentation: error: cannot reach the Dask "
                           f"scheduler tcp://127.0.0.1:{port} within 0.5 s: "), line
    assert built == []
