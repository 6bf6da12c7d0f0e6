"""Every numeric option of every command is parsed by the shared option types
(``fedhh.cli.options.integer_in``, ``number_in`` and the types built on them): the same text means
the same number everywhere, and a value out of range is refused as it is parsed, naming the
option and the range.

Before, the aggregator took Python's int and float: `--max-rounds 1e3` was "invalid int value"
(every other command reads it as 1000), and `--result-ttl inf`, `--max-round-seconds inf` and
`--tombstone-ttl inf` were accepted; privacy, certs and up each had their own copy of the
integer parse, each with its own wording."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from fedhh.cli import options
from fedhh.cli.main import build_parser

AGGREGATOR = ["aggregator", "--coordinator-key", "k.pub"]


def _actions(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{path} {name}")
        else:
            yield path, action


def test_no_option_takes_pythons_own_int_or_float() -> None:
    raw = [f"{path} {'/'.join(action.option_strings)}"
           for path, action in _actions(build_parser(), "fedhh")
           if action.type in (int, float)]
    assert raw == []


@pytest.mark.parametrize(("argv", "dest", "value"), [
    ([*AGGREGATOR, "--max-rounds", "1e3"], "max_rounds", 1000),
    ([*AGGREGATOR, "--quiet-close-ms", "0"], "quiet_close_ms", 0),
    ([*AGGREGATOR, "--quiet-close-tail", "0"], "quiet_close_tail", 0.0),
    (["privacy", "--delta", "1e-6", "--rounds", "4.0", "--devices", "1.6e6"], "devices",
     1_600_000),
])
def test_the_same_text_is_the_same_number(argv: list[str], dest: str, value: float) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == value


@pytest.mark.parametrize(("argv", "said"), [
    ([*AGGREGATOR, "--max-rounds", "0"], "argument --max-rounds: must be an integer >= 1, got 0"),
    ([*AGGREGATOR, "--max-rounds", "2.5"],
     "argument --max-rounds: must be an integer, got '2.5'"),
    ([*AGGREGATOR, "--max-round-seconds", "inf"],
     "argument --max-round-seconds: expected a positive number, got 'inf'"),
    ([*AGGREGATOR, "--tombstone-ttl", "nan"],
     "argument --tombstone-ttl: expected a positive number, got 'nan'"),
    ([*AGGREGATOR, "--quiet-close-tail", "-0.1"],
     "argument --quiet-close-tail: must be in [0, 1), got -0.1"),
    (["simulate", "--top", "-1"], "argument --top: must be an integer >= 0, got -1"),
    (["data", "inspect", "x", "--top", "0"], "argument --top: must be an integer >= 1, got 0"),
    (["certs", "--out", "t", "--days", "1e9"],
     "argument --days: must be at most 36,500 days (100 years), got 1e9"),
    (["up", "--processes", "99"], "argument --processes: must be at most 32 device processes"),
    (["privacy", "--delta", "1e-6", "--rounds", "0"],
     "argument --rounds: must be an integer >= 1, got 0"),
])
def test_a_value_out_of_range_names_the_option_and_the_range(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(argv)
    assert refused.value.code == 2
    assert said in capsys.readouterr().err


def test_a_huge_integer_is_refused_in_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Before, `simulate --dim-limit 1e300` was refused with all 301 digits of the integer."""
    from fedhh.cli.main import main

    with pytest.raises(SystemExit):
        main(["simulate", "--dim-limit", "1e300"])
    err = capsys.readouterr().err
    assert err.rstrip().endswith("dim_limit must be at most 67108864 in simulation, got 1e+300")


def test_an_integer_past_the_largest_double_is_refused_not_a_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before, math.isfinite of a 400-digit integer raised OverflowError in both option types
    (a traceback from `simulate --dim-limit 1000...0` and `data inspect --top 1000...0`), and
    the refusal's float() of it too."""
    from fedhh.cli.main import main

    huge = "1" + "0" * 400
    with pytest.raises(SystemExit):
        main(["simulate", "--dim-limit", huge])
    err = capsys.readouterr().err
    assert err.rstrip().endswith("in simulation, got more than 1e+308"), err
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["certs", "--out", "t", "--days", huge])
    assert refused.value.code == 2
    assert "argument --days: must be at most 36,500 days (100 years), got more than 1e+308" \
        in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--top", "-" + huge])
    assert "argument --top: must be an integer >= 0, got less than -1e+308" \
        in capsys.readouterr().err


@pytest.mark.parametrize(("text", "value"), [
    ("12345678901234567891.0", 12345678901234567891), ("9007199254740993.0", 2**53 + 1),
    ("1.6e6", 1_600_000), ("4.0", 4)])
def test_a_decimal_integer_is_that_integer_exactly(text: str, value: int) -> None:
    """Before, text with '.' or 'e' went through a double: 9007199254740993.0 was 2^53."""
    assert options.integer_in(0)(text) == value


@pytest.mark.parametrize("text", ["1e309", "1e999999999", "sNaN", "1.5", "1e-3"])
def test_a_decimal_that_is_no_integer_a_double_holds_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="must be an integer"):
        options.integer_in(0)(text)
