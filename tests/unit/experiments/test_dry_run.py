"""`fedhh experiments ... --dry-run` lists the runs without building a dataset (before: a dry
run of `all` on an empty cache built synthetic-reddit and synthetic-german first, 4 GB and
minutes, without a word when stderr was not a terminal). A run on a dataset not built yet is
listed as unknown: its store key hashes the dataset's identity, which only the build gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.data.registry import BUILTINS
from fedhh.experiments.populations import DIRECTORIES, NAMED, built


def dry_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["experiments", *argv, "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def test_a_dry_run_on_an_empty_cache_builds_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FEDHH_CACHE", str(cache))
    out = dry_run(["all", "--store", str(tmp_path / "store")], capsys)
    assert not cache.exists()
    lines = out.splitlines()
    assert lines[-1] == ("191 runs, 0 stored, 0 to run, 191 unknown: on datasets not built yet "
                         "(synthetic-reddit, synthetic-german; the run builds them, and only "
                         "then can their stored runs be told)")
    assert lines[0].startswith("unknown  segmentation  adaptive  seed 0")
    assert lines[1].strip().startswith("fedhh simulate --dataset synthetic-reddit ")


def test_a_dry_run_tells_the_runs_on_built_datasets_apart(
        tiny_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FEDHH_CACHE", str(cache))
    argv = ["codebooks", "--dataset", str(tiny_path), "--seeds", "1",
            "--store", str(tmp_path / "store")]
    out = dry_run(argv, capsys)
    states = [line.split()[0] for line in out.splitlines()[:-1] if not line.startswith(" ")]
    summary = out.splitlines()[-1]
    runs, pending, unknown = len(states), states.count("pending"), states.count("unknown")
    assert pending and unknown and pending + unknown == runs
    assert summary == (f"{runs} runs, 0 stored, {pending} to run, {unknown} unknown: on datasets "
                       "not built yet (synthetic-german; the run builds them, and only then "
                       "can their stored runs be told)")
    # Built (here: the tiny dataset in German's place), its runs are known too.
    shutil.copytree(tiny_path, cache / BUILTINS["synthetic-german"].directory_name())
    assert built("synthetic-german")
    out = dry_run(argv, capsys)
    assert out.splitlines()[-1] == f"{runs} runs, 0 stored, {runs} to run"


def test_every_named_population_has_its_cache_directory() -> None:
    assert set(DIRECTORIES) == set(NAMED)


def test_paths_and_unknown_names_count_as_built(tiny_path: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    assert built(str(tiny_path))
    assert built(str(tmp_path / "no-such-dataset"))  # (opening it says what is wrong)
    assert not built("synthetic-reddit") and not built("dev-reddit-400k")
    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_path, tmp_path / "synthetic-reddit")
    assert built("synthetic-reddit")  # a path of that name goes first, as resolve() takes it
