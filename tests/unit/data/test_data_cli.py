"""`fedhh data`: actions end to end on small data; invalid values exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.cli.data import register
from fedhh.cli.main import OneLineErrorParser, usage_error
from fedhh.data.wordlists import load_item_list
from fedhh.errors import FedhhError


def run(argv: list[str]) -> int:
    """Parse and dispatch like fedhh.cli.main.main, with only the data command registered."""
    parser = OneLineErrorParser(prog="fedhh")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except FedhhError as error:
        usage_error(f"fedhh {args.command}", str(error))


def test_describe_and_warm_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["data", "describe", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "synthetic-reddit (default)" in out and "shakespeare" in out
    assert "OpenSubtitles" in out
    assert run(["data", "warm-start", "--out", str(tmp_path / "warm.txt"), "--size", "50"]) == 0
    assert len(load_item_list(tmp_path / "warm.txt")) == 50


def test_import_and_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "u.txt"
    src.write_text("Apple pie apple\n\nbanana\n", encoding="utf-8")
    out = tmp_path / "ds"
    assert run(["data", "import", str(src), "--format", "text", "--out", str(out),
                "--lowercase"]) == 0
    capsys.readouterr()
    assert run(["data", "inspect", str(out), "--json", "--top", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["users"] == 3 and report["users_without_items"] == 1
    assert report["top_weighted"][0]["item"] in {"apple", "banana"}
    assert run(["data", "inspect", str(out)]) == 0
    assert "mean words per user" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["data", "generate", "nope"], "argument name: invalid choice"),
        (["data", "generate", "synthetic-reddit", "--users", "0"], "argument --users"),
        (["data", "generate", "synthetic-reddit", "--seed", "-2"], "argument --seed"),
        (["data", "generate", "shakespeare", "--users", "5"], "--users and --seed"),
        (["data", "warm-start", "--out", "x", "--size", "10000000"], "--size must be at most"),
        (["data", "inspect", "x", "--top", "many"], "argument --top"),
        (["data", "import", "missing.txt", "--format", "text", "--out", "o"], "PATH"),
        (["data", "import", "a.txt", "--format", "csv", "--out", "o"], "argument --format"),
        (["data", "inspect", "no-such-dataset"], "not a built-in dataset"),
    ],
)
def test_invalid_values_exit_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], needle: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        run(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err
