"""A newcomer's first command lines: no command, a command's options before it, an output
encoding that lacks an item's characters, a dataset cache that cannot be written.

Before: `fedhh` alone said "the following arguments are required: command" (naming none);
`fedhh --insecure up` said "fedhh up: error: unrecognized arguments: --insecure (did you mean
--insecure?)"; under PYTHONIOENCODING=ascii `fedhh simulate` ended in a UnicodeEncodeError
traceback at its first accented item; a read-only working folder said only "Permission
denied: .../cache"."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from cli_kit import one_line_error, run_cli

from fedhh.cli.main import SUBCOMMANDS, main


@pytest.mark.parametrize("argv, line", [
    ([], "fedhh: error: name a command: " + ", ".join(SUBCOMMANDS)
     + " (`fedhh --help` says what each does)"),
    (["-v"], "fedhh: error: name a command: " + ", ".join(SUBCOMMANDS)
     + " (`fedhh --help` says what each does)"),
    (["admin"], "fedhh admin: error: name an action: start, status, results, wait, cancel, "
     "list, devices, mint-tokens (`fedhh admin --help` says what each does)"),
    (["data"], "fedhh data: error: name an action: describe, generate, import, inspect, "
     "warm-start (`fedhh data --help` says what each does)"),
])
def test_a_line_without_its_command_names_the_commands(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert one_line_error(argv, capsys) == line


@pytest.mark.parametrize("argv, line", [
    (["--insecure", "up"], "fedhh: error: --insecure before the command up: a command's "
     "options go after it: fedhh up --insecure"),
    (["--eps-agg", "2", "up", "--dataset", "a b.txt"], "fedhh: error: --eps-agg before the "
     "command up: a command's options go after it: fedhh up --eps-agg 2 --dataset 'a b.txt'"),
    (["-v", "--json=x.json", "privacy", "--rounds", "3"], "fedhh: error: --json=x.json "
     "before the command privacy: a command's options go after it: fedhh -v privacy "
     "--json=x.json --rounds 3"),
])
def test_a_commands_options_before_it_are_named_with_the_line_that_works(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert one_line_error(argv, capsys) == line


def test_the_usage_line_names_command_not_fourteen_choices(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0
    assert out.splitlines()[0] == "usage: fedhh [-h] [-v] [--version] COMMAND ..."
    # (a typo still gets its hint)
    assert one_line_error(["simulat"], capsys).endswith("(did you mean simulate?)")


def test_items_an_ascii_output_cannot_encode_are_escaped_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.txt"
    users.write_text("café 😀\nnaïve\n", encoding="utf-8")
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii", write_through=True)
    monkeypatch.setattr(sys, "stdout", out)  # (as PYTHONIOENCODING=ascii makes it)
    assert main(["data", "inspect", str(users)]) == 0
    shown = raw.getvalue().decode("ascii")
    assert "caf\\xe9" in shown and "na\\xefve" in shown and "\\U0001f600" in shown


def test_a_cache_folder_that_cannot_be_made_is_named_as_the_dataset_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("")
    monkeypatch.setenv("FEDHH_CACHE", str(blocker))  # (a file: no folder can be made in it)
    users = tmp_path / "users.txt"
    users.write_text("apple\n" * 3)
    line = one_line_error(["simulate", "--dataset", str(users)], capsys)
    assert line == (f"fedhh simulate: error: Not a directory: {blocker}/imported (the "
                    "dataset cache, where datasets are built and imported: $FEDHH_CACHE; set "
                    "FEDHH_CACHE to a folder you can write; docs/datasets.md)")
