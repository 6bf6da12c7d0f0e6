"""An option of a subcommand given before the subcommand's name is told to come after it.
Before, `fedhh experiments --quiet all` was "unrecognized arguments: --quiet (did you mean
--quiet?)", and `fedhh experiments --workers 2 all` "invalid choice: '2' ... (--workers is no
option of fedhh experiments)", as if the option did not exist (docs/experiments.md shows
`fedhh experiments all --workers 2`)."""

from __future__ import annotations

import pytest
from cli_kit import one_line_error


@pytest.mark.parametrize("argv, line", [
    (["experiments", "--quiet", "all"],
     "fedhh experiments all: error: unrecognized arguments: --quiet (--quiet must come after "
     "'all', as in fedhh experiments all --quiet)"),
    (["experiments", "--seeds=2", "segmentation"],
     "fedhh experiments segmentation: error: unrecognized arguments: --seeds=2 (--seeds=2 "
     "must come after 'segmentation', as in fedhh experiments segmentation --seeds=2)"),
])
def test_a_flag_before_the_subcommand_is_told_to_come_after_it(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert one_line_error(argv, capsys) == line


@pytest.mark.parametrize("argv, hint", [
    (["experiments", "--workers", "2", "all"],
     "(--workers must come after the study, as in fedhh experiments all --workers 2)"),
    (["experiments", "--dataset", "users"],
     "(--dataset must come after the study, as in fedhh experiments STUDY --dataset users)"),
    (["data", "--out", "x", "generate"],
     "(--out must come after the action, as in fedhh data generate --out x)"),
])
def test_an_option_whose_value_was_read_as_the_subcommand_is_told_to_come_after_it(
        argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(argv, capsys)
    assert "invalid choice" in line and line.endswith(f") {hint}")
