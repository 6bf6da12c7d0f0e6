"""A service's error names the deploy/.env variable behind an option it refuses, where
docker-compose.yml says which (FEDHH_OPTIONS_FROM_ENV): the operator edits .env and never types
the options (tests/integration/test_deploy.py refuses each service's values through compose)."""

from __future__ import annotations

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
