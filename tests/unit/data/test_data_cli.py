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


def test_describe_of_one_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["data", "describe", "shakespeare", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("shakespeare: ") and "synthetic-reddit" not in out
    assert "warm-start" not in out
    with pytest.raises(SystemExit) as exit_info:
        run(["data", "describe", "shakespear", "--cache-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "did you mean 'shakespeare'?" in err and "fedhh data inspect shakespear " in err
    assert not any(tmp_path.iterdir())


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


def test_import_of_items_with_spaces(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    src = tmp_path / "queries.jsonl"
    src.write_text('["new york", "new york", "how to"]\n{"how to": 2}\n\n', encoding="utf-8")
    out = tmp_path / "ds"
    assert run(["data", "import", str(src), "--format", "jsonl", "--out", str(out)]) == 0
    capsys.readouterr()
    assert run(["data", "inspect", str(out), "--json", "--top", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["users"] == 3 and report["users_without_items"] == 1
    assert {row["item"] for row in report["top_weighted"]} == {"new york", "how to"}


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


def test_writing_a_dataset_replaces_nothing_but_an_earlier_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A dataset is written by replacing the whole target: --out may name a new or empty
    folder, or an earlier dataset with --force; never a file, a folder of other things, the
    input itself, or (an empty string) the current folder."""
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "u.txt"
    src.write_text("apple pie\nbanana\n", encoding="utf-8")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious", encoding="utf-8")
    single = tmp_path / "single.txt"
    single.write_text("precious", encoding="utf-8")
    cases = [
        (["data", "import", str(src), "--format", "text", "--out", str(folder)],
         "holds something other than a fedhh dataset"),
        (["data", "import", str(src), "--format", "text", "--out", str(single)],
         "exists and is not a folder"),
        (["data", "import", str(src), "--format", "text", "--out", str(src)], "the input"),
        (["data", "import", str(src), "--format", "text", "--out", str(tmp_path)], "the input"),
        (["data", "import", str(src), "--format", "text", "--out", ""], "an empty string"),
        (["data", "generate", "synthetic-reddit-small", "--users", "2", "--out", str(folder)],
         "holds something other than a fedhh dataset"),
        (["data", "generate", "synthetic-reddit-small", "--users", "2", "--out", ""],
         "an empty string"),
    ]
    for argv, needle in cases:
        with pytest.raises(SystemExit) as info:
            run(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, (argv, err)
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "precious"
    assert single.read_text(encoding="utf-8") == "precious"
    assert src.read_text(encoding="utf-8") == "apple pie\nbanana\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "single.txt", "u.txt"]

    out = tmp_path / "ds"
    out.mkdir()  # an empty folder is fine
    assert run(["data", "import", str(src), "--format", "text", "--out", str(out)]) == 0
    with pytest.raises(SystemExit):  # an earlier dataset, without --force
        run(["data", "import", str(src), "--format", "text", "--out", str(out)])
    assert "add --force" in capsys.readouterr().err
    assert run(["data", "import", str(src), "--format", "text", "--out", str(out),
                "--force"]) == 0


def test_inspect_cuts_an_item_longer_than_its_column(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A 5,000-character item in the top is cut to the column's 160 columns (which fit a long
    URL: tests/cli/test_terminal_text.py), its … at the end, and every row is as wide. Before
    the item widened every row's column to 160 and pushed its own row 5,000 columns on (and
    before that, every row of the list was padded to 5,034 characters). An item of its own
    ending in … shows it escaped, so the two read apart; --json keeps the item whole."""
    src = tmp_path / "long.jsonl"
    src.write_text(('["' + "B" * 5000 + '"]\n') * 3 + '["short…"]\n["short…"]\n["x"]\n',
                   encoding="utf-8")
    out = tmp_path / "ds"
    assert run(["data", "import", str(src), "--format", "jsonl", "--out", str(out)]) == 0
    capsys.readouterr()
    assert run(["data", "inspect", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if "rank" in line):]
    # (then the line on items past the codes, 94122048: the 5,000 B are)
    long_row, short_row, _, note, past = table[1:]
    assert long_row.split() == ["1", "B" * 159 + "…", "0.50000", "0.5000"]
    assert short_row.split() == ["2", "short\\u2026", "0.33333", "0.3333"]
    assert len({len(row) for row in table[:4]}) == 1 and len(long_row) < 200
    assert past.startswith("  1 item is longer than the codes can be")
    assert note == ("  (1 listed here is wider than the item column's 160 columns, cut to them "
                    "ending in …: each stands for its item, which begins so; --json gives it "
                    "whole)")
    assert run(["data", "inspect", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["top_weighted"][0]["item"] == "B" * 5000


def test_inspect_cuts_a_long_item_between_grapheme_clusters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """300 flags (two regional indicators each) after two letters: cut at 160 columns, the
    cut keeps whole flags (before: 78 flags and the first letter of the 79th, which draws as
    a boxed U, read as a flag of its own)."""
    src = tmp_path / "flags.jsonl"
    src.write_text('["xy' + "\U0001f1fa\U0001f1f8" * 300 + '"]\n["y"]\n', encoding="utf-8")
    out = tmp_path / "ds"
    assert run(["data", "import", str(src), "--format", "jsonl", "--out", str(out)]) == 0
    capsys.readouterr()
    assert run(["data", "inspect", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if "\U0001f1fa" in line)
    shown = row.split()[1]
    assert shown.startswith("xy") and shown.endswith("…")
    assert shown[2:-1] == "\U0001f1fa\U0001f1f8" * ((len(shown) - 3) // 2), shown


def test_data_counts_are_read_as_every_other_command_reads_them() -> None:
    # One parser per rule: `data` used its own copies, which refused 1e3 (every other
    # command takes an integral 1e3 as 1000) and named a seed "an integer >= 0".
    parser = OneLineErrorParser(prog="fedhh")
    register(parser.add_subparsers(dest="command", required=True,
                                   parser_class=OneLineErrorParser))
    args = parser.parse_args(["data", "generate", "synthetic-reddit", "--users", "1e3",
                              "--seed", "0"])
    assert (args.users, args.seed) == (1000, 0)
    assert parser.parse_args(["data", "inspect", "x", "--top", "2e1"]).top == 20
