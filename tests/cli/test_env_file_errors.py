"""A service's error names the deploy/.env variable behind an option it refuses, where
docker-compose.yml says which (FEDHH_OPTIONS_FROM_ENV): the operator edits .env and never types
the options (tests/integration/test_deploy.py refuses each service's values through compose)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli.main import env_file_names, main

SOURCES = "--web-origin=FEDHH_WEB_ORIGINS --aggregator-public-address=FEDHH_HOST,FEDHH_PORT"


def test_a_later_check_naming_the_option_names_its_variable_too(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_OPTIONS_FROM_ENV", SOURCES)
    with pytest.raises(SystemExit):
        main(["aggregator", "--coordinator-key", "key.pub", "--web-origin", "https://a.example"])
    assert capsys.readouterr().err == (
        "fedhh aggregator: error: --web-origin needs --web-listen: the origins may call the "
        "Connect port, which is off without it (--web-origin is FEDHH_WEB_ORIGINS in "
        "deploy/.env)\n")


def test_a_device_dataset_the_container_does_not_hold_is_named_by_its_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """FEDHH_DEVICE_DATASET names a host file no override mounted: the refusal named neither
    --dataset nor the variable ("/datasets/users.txt does not exist and is not a built-in
    dataset")."""
    monkeypatch.setenv("FEDHH_OPTIONS_FROM_ENV", "--dataset=FEDHH_DEVICE_DATASET")
    missing = tmp_path / "datasets" / "users.txt"
    with pytest.raises(SystemExit):
        main(["device", "--coordinator", "127.0.0.1:9", "--insecure", "--dataset", str(missing),
              "--users", "0:2", "--state-dir", str(tmp_path / "state")])
    said = capsys.readouterr().err
    assert said.startswith(f"fedhh device: error: --dataset: {missing} does not exist"), said
    assert said.endswith(" (--dataset is FEDHH_DEVICE_DATASET in deploy/.env)\n"), said
    assert not (tmp_path / "state").exists()


def test_an_origin_of_another_shape_is_named_by_its_option_and_variable(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """FEDHH_WEB_ORIGINS=example.org (no scheme): before, "a web origin is scheme://host[:port]
    with no path, got 'example.org'", naming neither --web-origin nor the variable."""
    monkeypatch.setenv("FEDHH_OPTIONS_FROM_ENV", SOURCES)
    with pytest.raises(SystemExit):
        main(["aggregator", "--coordinator-key", "key.pub", "--web-listen", "127.0.0.1:0",
              "--web-origin", "example.org"])
    assert capsys.readouterr().err == (
        "fedhh aggregator: error: --web-origin: a web origin is scheme://host[:port] with no "
        "path, got 'example.org' (--web-origin is FEDHH_WEB_ORIGINS in deploy/.env)\n")


def test_an_option_of_two_variables_names_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_OPTIONS_FROM_ENV", SOURCES)
    assert env_file_names("argument --aggregator-public-address: must be HOST:PORT") == (
        "FEDHH_HOST or FEDHH_PORT (deploy/.env, given as --aggregator-public-address): "
        "must be HOST:PORT")
    # (a longer option that begins with a mapped one is not it)
    assert env_file_names("--web-origins-file: no such file") == "--web-origins-file: no such file"


def test_without_compose_errors_are_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEDHH_OPTIONS_FROM_ENV", raising=False)
    said = "argument --web-origin: not an origin"
    assert env_file_names(said) == said
