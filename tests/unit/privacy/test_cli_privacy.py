"""`fedhh privacy`: forms, JSON keys, one-line errors with exit code 2."""

from __future__ import annotations

import argparse
import json

import pytest

from fedhh.cli import privacy as cli
from fedhh.cli.main import OneLineErrorParser, usage_error
from fedhh.errors import FedhhError


def run(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="fedhh")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    cli.register(sub)
    args: argparse.Namespace = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except FedhhError as error:
        usage_error(f"fedhh {args.command}", str(error))


BASE = ["--eps-agg", "1", "--delta", "1e-6", "--rounds", "4"]


def test_default_mechanism_is_optprefixtree(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["privacy", *BASE, "--devices", "100000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mechanism"] == "optprefixtree"
    assert data["eps_local"] > 1 and data["breakdown"]["tightest"] in (
        "rdp",
        "advanced-composition",
    )


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["privacy", *BASE, "--devices", "100000", "--sampling-rate", "0.5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("eps_local = ") and "alpha" in out


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["triehh", "--theta", "10", "--devices", "1600000"], "sampling_rate"),
        (["triehh++", "--theta", "10"], "sampling_rate"),
        (["central-gaussian"], "sigma"),
        (["central-laplace", "--sensitivity", "2"], "scale"),
    ],
)
def test_variants(argv: list[str], key: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["privacy", *argv, *BASE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[key] > 0 and data["mechanism"] == argv[0]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--eps-agg", "0", "--delta", "1e-6", "--rounds", "4", "--devices", "10"], "--eps-agg"),
        (["--eps-agg", "1", "--delta", "1", "--rounds", "4", "--devices", "10"], "--delta"),
        (["--eps-agg", "1", "--delta", "1e-6", "--rounds", "0", "--devices", "10"], "--rounds"),
        (["--eps-agg", "1", "--delta", "1e-6", "--rounds", "2", "--devices", "1"], "--devices"),
        ([*BASE, "--devices", "10", "--sampling-rate", "1.5"], "--sampling-rate"),
        ([*BASE], "--devices"),
        (["triehh", *BASE, "--devices", "100"], "--theta"),
        (["triehh", "--theta", "5", *BASE, "--devices", "100"], "theta=5"),
    ],
)
def test_errors_are_one_line_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        run(["privacy", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err
