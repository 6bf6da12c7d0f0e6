"""A misspelt option, subcommand or choice is answered with the closest one the command knows.
Before, the error named the word alone ("unrecognized arguments: --eps-ag 2"), and options are
not abbreviated (`OneLineErrorParser`), so a new user was left to read the --help."""

from __future__ import annotations

import re

import pytest
from cli_kit import one_line_error


@pytest.mark.parametrize("argv, line", [
    (["admin", "--coordinator", "127.0.0.1:7000", "start", "--run-id", "r1", "--eps-ag", "2"],
     "fedhh admin start: error: unrecognized arguments: --eps-ag 2 (did you mean --eps-agg?)"),
    (["up", "--datset=users.txt"],
     "fedhh up: error: unrecognized arguments: --datset=users.txt (did you mean --dataset?)"),
    (["simulate", "--selction", "weighted", "--rouns", "3"],
     "fedhh simulate: error: unrecognized arguments: --selction weighted --rouns 3 (did you "
     "mean --selection or --rounds?)"),
    (["up", "-dataset", "users.txt"],
     "fedhh up: error: unrecognized arguments: -dataset users.txt (did you mean --dataset?)"),
    (["up", "\u2014dataset", "users.txt"],  # (two hyphens typeset as an em dash)
     "fedhh up: error: unrecognized arguments: \u2014dataset users.txt (did you mean "
     "--dataset?)"),
    (["up", "\u2013devices", "5"],  # (an en dash)
     "fedhh up: error: unrecognized arguments: \u2013devices 5 (did you mean --devices?)"),
])
def test_a_misspelt_option_gets_the_closest_one(argv: list[str], line: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert one_line_error(argv, capsys) == line


@pytest.mark.parametrize("argv, suggestion", [
    (["simulte"], "(did you mean simulate?)"),
    (["admin", "strat"], "(did you mean start?)"),
    (["data", "generate", "shakespear"], "(did you mean shakespeare?)"),
])
def test_a_misspelt_choice_gets_the_closest_one(argv: list[str], suggestion: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(argv, capsys)
    assert "invalid choice" in line and line.endswith(f") {suggestion}")


@pytest.mark.parametrize("argv, suggestion", [
    (["admin", "stat"], "(did you mean status?)"),
    (["admin", "mint"], "(did you mean mint-tokens?)"),
    (["privacy", "amp"], "(did you mean amplify?)"),
])
def test_a_choice_cut_short_gets_the_one_it_begins(argv: list[str], suggestion: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `admin stat` got "did you mean start?" (closer by letters than status), and
    `admin mint`, `privacy amp` nothing (too short to be close to any)."""
    line = one_line_error(argv, capsys)
    assert "invalid choice" in line and line.endswith(f") {suggestion}")


@pytest.mark.parametrize("argv, hint", [
    (["admin", "--coordinatr", "127.0.0.1:7000", "list"],
     "(--coordinatr is no option of fedhh admin: did you mean --coordinator?)"),
    (["admin", "--bogus", "127.0.0.1:7000", "list"], "(--bogus is no option of fedhh admin)"),
])
def test_a_value_read_as_the_action_after_an_unknown_option_names_that_option(
        argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "invalid choice: '127.0.0.1:7000' (choose from 'start', ...)" alone: the
    misspelt option was left out, and its value read as the action."""
    line = one_line_error(argv, capsys)
    assert line.startswith("fedhh admin: error: argument action: invalid choice: "
                           "'127.0.0.1:7000'") and line.endswith(f") {hint}")


@pytest.mark.parametrize("argv, suggestion", [
    (["up", "--eps", "2"], "(did you mean --eps-agg or --eps-local?)"),
    (["privacy", "--eps", "1"],
     "(--eps is no option of fedhh privacy: did you mean --eps-agg or --eps-local?)"),
])
def test_an_option_cut_short_gets_the_few_it_begins(argv: list[str], suggestion: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `--eps` got no hint (two options begin it, and it is close to neither)."""
    assert one_line_error(argv, capsys).endswith(f" {suggestion}")


@pytest.mark.parametrize("argv, line", [
    (["up", "--json", "x.json"],
     "fedhh up: error: unrecognized arguments: --json x.json (--json is an option of fedhh "
     "simulate, fedhh privacy and 2 other commands, not of fedhh up)"),
    (["simulate", "--workdir", "w", "--tls-dir", "t"],
     "fedhh simulate: error: unrecognized arguments: --workdir w --tls-dir t (--workdir is an "
     "option of fedhh up and fedhh loadtest, not of fedhh simulate; --tls-dir is an option of "
     "fedhh coordinator, fedhh selector and 2 other commands, not of fedhh simulate)"),
    (["up", "--scheduler", "tcp://h:8786"],  # (each study of experiments takes it)
     "fedhh up: error: unrecognized arguments: --scheduler tcp://h:8786 (--scheduler is an "
     "option of fedhh experiments, not of fedhh up)"),
])
def test_another_commands_option_names_the_commands_that_take_it(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """An option copied from another command's example, close to none of this command's:
    before, the refusal named it alone, as if misspelt."""
    assert one_line_error(argv, capsys) == line


def test_nothing_is_guessed_for_a_word_close_to_no_option(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert one_line_error(["up", "--bogus"], capsys) == \
        "fedhh up: error: unrecognized arguments: --bogus"
    assert "did you mean" not in one_line_error(["zzzz"], capsys)


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_verbose_after_the_command_is_taken(flag: str, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `fedhh privacy ... --verbose` was "unrecognized arguments: --verbose" (argparse
    takes fedhh's own options before the command only)."""
    import logging

    from cli_kit import run_cli

    levels: list[int] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: levels.append(kw["level"]))
    code, out, err = run_cli(["privacy", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4",
                              "--devices", "1600000", flag], capsys)
    assert code == 0 and "eps_local" in out, err
    assert levels == [logging.DEBUG]


@pytest.mark.parametrize("argv", [
    ["experiments", "--workerz", "2", "all"],
    ["experiments", "all", "--workerz", "2"],
])
def test_a_misspelt_option_of_the_study_gets_it_before_the_study_too(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Before: given before the study, `--workerz 2` got "(--workerz is no option of fedhh
    experiments)" alone; after it, "did you mean --workers?"."""
    assert "did you mean --workers" in one_line_error(argv, capsys)


def test_the_misspelt_option_before_the_study_is_shown_where_it_goes(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert one_line_error(["experiments", "--workerz", "2", "all"], capsys).endswith(
        " (--workerz is no option of fedhh experiments: did you mean --workers, after the "
        "study, as in fedhh experiments all --workers 2?)")


@pytest.mark.parametrize("argv, line", [
    (["up", "--e"],
     "fedhh up: error: unrecognized arguments: --e (--e is ambiguous: --eps-agg, --eps-local, "
     "--eta and --expected-dropout begin with it)"),
])
def test_a_word_that_begins_many_options_is_called_ambiguous(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `fedhh up --e` got "did you mean --web?" (four options begin --e, so the
    closest by letters was taken, one --e does not begin)."""
    assert one_line_error(argv, capsys) == line


def test_past_five_the_ambiguous_names_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["up", "--d", "x", "--wor", "3"], capsys)
    assert re.search(r" \(--d is ambiguous: (--d[a-z-]+, ){3}--d[a-z-]+ and \d+ others begin "
                     r"with it; did you mean --workdir\?\)$", line), line
    line = one_line_error(["experiments", "s"], capsys)
    assert re.search(r" \(s is ambiguous: (s[a-z-]+, ){3}s[a-z-]+ and \d+ others begin with "
                     r"it\)$", line), line


def test_a_word_before_the_subcommand_that_begins_many_of_its_options_is_called_ambiguous(
        capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.main import OneLineErrorParser

    parser = OneLineErrorParser(prog="tool")
    study = parser.add_subparsers(dest="study", metavar="STUDY").add_parser("one")
    for option in ("--eta", "--eps", "--epochs", "--extra"):
        study.add_argument(option)
    with pytest.raises(SystemExit):
        parser.parse_args(["--e", "2", "one"])
    assert capsys.readouterr().err.endswith(
        " (--e is no option of tool; after the study, --e is ambiguous: --eta, --eps, --epochs "
        "and --extra begin with it)\n")
