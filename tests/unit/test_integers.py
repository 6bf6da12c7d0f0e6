"""One exact reader of integers written as text (fedhh/integers.py), and every surface that
reads one gives the same answer: a run's integer knob (``fedhh.config.flags``: `simulate`,
`admin start`, `up`, and the compose and Kubernetes variables that become those flags) and a
command's integer option (``fedhh.cli.options.integer_in``).

Before, ``fedhh.config.flags.integer`` was a float-based copy: `--seed 9007199254740993.0` was
2^53 and `--rounds -1e25` -10000000000000000905969664, where every other option read them
exactly."""

from __future__ import annotations

import argparse

import pytest

from fedhh.cli import options
from fedhh.config import Mode
from fedhh.config.flags import add_run_arguments
from fedhh.errors import ConfigError
from fedhh.integers import read_integer, read_number

# text -> the integer it writes, or None: refused
CASES = {
    "9007199254740993": 2**53 + 1,
    "9007199254740993.0": 2**53 + 1,
    "12345678901234567891.0": 12345678901234567891,
    "1e3": 1000,
    "1.6E6": 1_600_000,
    "4.0": 4,
    "-1e25": -10**25,
    "1e308": 10**308,
    " 7 ": 7,
    "+7": 7,
    "1" + "0" * 400: 10**400,  # plain integer text is int()'s, however long (to 4,300 digits)
    "1e309": None,
    "1e999999999": None,
    "inf": None,
    "-inf": None,
    "Infinity": None,
    "nan": None,
    "sNaN": None,
    "0x10": None,
    "1.5": None,
    "1e-3": None,
    "": None,
    "seven": None,
}


def _run_flag(text: str) -> int:
    """``text`` as the value of a run's integer knob (--seed: no bound at parse time)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(parser, Mode.SIMULATION)
    return parser.parse_args(["--seed=" + text]).seed


@pytest.mark.parametrize("text", list(CASES))
def test_every_surface_reads_the_same_integer(text: str) -> None:
    expected = CASES[text]
    option = options.integer_in(-10**500)
    if expected is None:
        with pytest.raises(ConfigError, match="must be an integer, got ") as refused:
            read_integer(text)
        with pytest.raises(argparse.ArgumentTypeError) as by_option:
            option(text)
        with pytest.raises(argparse.ArgumentError) as by_flag:
            _run_flag(text)
        said = str(refused.value)
        assert str(by_option.value) == said
        assert str(by_flag.value) == f"argument --seed: {said}"
        return
    assert read_integer(text) == expected
    assert type(read_integer(text)) is int
    assert option(text) == expected
    assert _run_flag(text) == expected


def test_a_long_refused_text_is_shown_shortened() -> None:
    with pytest.raises(ConfigError) as refused:
        read_integer("1" * 5000)  # (past int()'s 4,300 digits)
    assert str(refused.value) == ("must be an integer, got '11111111111111111111'... (5,000 "
                                  "characters)")


def test_user_spans_read_their_ends_as_integers() -> None:
    """`admin mint-tokens --users` and `device --users` read START:END as every integer
    option does (before, int(): 1e3:2e3 was refused where --count 1e3 was taken)."""
    from fedhh.cli.admin import user_span
    from fedhh.rpc.device_users import user_range

    assert user_span("1e3:2.0e3") == range(1000, 2000) == user_range("1e3:2.0e3", 5000)
    for text in ("0:1.5", "0:inf", "0x1:2"):
        with pytest.raises(argparse.ArgumentTypeError):
            user_span(text)
        with pytest.raises(ConfigError, match="--users"):
            user_range(text, 5000)


# Python's int and Decimal read any script's decimal digits and blanks
FOREIGN = ["١٢٣", "１２", "1e٣", "٤.0", "१०", "7\u00a0", "\u20037"]


@pytest.mark.parametrize("text", FOREIGN)
def test_digits_of_other_scripts_are_refused_everywhere(text: str) -> None:
    # (before, int("١٢٣") made --seed 123, "1e٣" 1000 and "7\xa0" 7)
    said = f"must be an integer written with the digits 0-9, got {text!r}"
    with pytest.raises(ConfigError) as refused:
        read_integer(text)
    assert str(refused.value) == said
    with pytest.raises(argparse.ArgumentTypeError) as by_option:
        options.integer_in(0)(text)
    assert str(by_option.value) == said
    with pytest.raises(argparse.ArgumentError) as by_flag:
        _run_flag(text)
    assert str(by_flag.value) == f"argument --seed: {said}"



def test_a_runs_items_per_round_are_read_as_integer_options_are() -> None:
    # (before, int(): "1,٢" was (1, 2) and "1,1e1" refused)
    from fedhh.config import RunConfig

    assert RunConfig(rounds=2, round_items="1,1e1").items_per_round() == (1, 10)
    with pytest.raises(ConfigError, match="round_items must be a count or comma-separated"):
        RunConfig(rounds=2, round_items="1,٢").items_per_round()


# Python reads '_' between digits; an operator's number has none (fedhh/integers.py)
GROUPED = ["1_000", "1_0e2", "-1_000", "1_0.5"]


@pytest.mark.parametrize("text", GROUPED)
def test_underscores_are_refused_in_integers_and_numbers(text: str) -> None:
    # (before, int('1_000') and Decimal('1_0e2') were 1000, float('1_0.5') 10.5)
    for reader, what in ((read_integer, "an integer"), (read_number, "a number")):
        with pytest.raises(ConfigError) as refused:
            reader(text)
        assert str(refused.value) == f"must be {what} written without '_', got {text!r}"
    with pytest.raises(argparse.ArgumentTypeError, match="without '_'"):
        options.integer_in(-10**5)(text)
    with pytest.raises(argparse.ArgumentTypeError, match="without '_'"):
        options.number_in(lambda x: True, "any")(text)


def test_blanks_around_a_value_are_ignored_by_both_readers() -> None:
    assert read_integer(" 7\n") == 7
    assert read_number("\t1.5 ") == 1.5


# float() reads any script's digits and blanks: float("١.٥") is 1.5, "１e３" 1000.0
FOREIGN_NUMBERS = ["١.٥", "١", "１e３", "0.٥", "1.5\u00a0", "\u20031"]


def _flag(argv: list[str], dest: str) -> float:
    from fedhh.cli.main import build_parser

    return getattr(build_parser().parse_args(argv), dest)


@pytest.mark.parametrize("text", FOREIGN_NUMBERS)
def test_numbers_in_other_scripts_digits_are_refused_everywhere(
        text: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every float option and knob reads its text by read_number: a run's --eps-agg (a knob),
    the coordinator's --lifetime-eps (positive_float), the aggregator's --quiet-close-tail
    (number_in), privacy --eps-agg and a run's per-round list."""
    from fedhh.config import RunConfig

    said = f"must be a number written with the digits 0-9, got {text!r}"
    with pytest.raises(ConfigError) as refused:
        read_number(text)
    assert str(refused.value) == said
    for argv, option in (
            (["simulate", "--eps-agg", text], "--eps-agg"),
            (["simulate", "--fp-ratio-finished", text], "--fp-ratio-finished"),
            (["coordinator", "--aggregator", "a:1", "--lifetime-eps", text], "--lifetime-eps"),
            (["aggregator", "--coordinator-key", "k.pub", "--quiet-close-tail", text],
             "--quiet-close-tail"),
            (["privacy", "--delta", "1e-6", "--eps-agg", text], "--eps-agg")):
        with pytest.raises(SystemExit) as exit_:
            _flag(argv, "unused")
        assert exit_.value.code == 2
        assert f"argument {option}: {said}" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="round_budget must be 'equal' or comma-separated"):
        RunConfig(rounds=2, round_budget=f"1,{text}").round_weights()


def test_the_float_readers_still_read_what_they_read() -> None:
    """inf and nan are each option's to take or refuse, as before; plain numbers unchanged."""
    assert read_number("-Infinity") == float("-inf")
    assert read_number("1.5E-3") == 0.0015
    assert _flag(["simulate", "--eps-agg", "2.5"], "eps_agg") == 2.5
    for refuse in (options.positive_float, options.non_negative_float):
        with pytest.raises(argparse.ArgumentTypeError, match="got 'inf'"):
            refuse("inf")


@pytest.mark.parametrize("text", ["1e-400", "-1e-400", "2e-324", "0.1e-330",
                                  # (an exponent Decimal refuses: before, a traceback)
                                  "1e-99999999999999999999", "-2E-9999999999999999999"])
def test_a_number_no_double_holds_is_refused_as_typed_not_as_0(
        text: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A number nearer 0 than the smallest double was read as 0, and the option's range check
    refused the 0 nobody typed: `simulate --delta 1e-400` said 'delta must be in (0, 1), got
    0.0'. Now the refusal quotes the text, on a knob and on a command's own option."""
    said = (f"got {text!r}, nearer 0 than the smallest double (4.9e-324): it would be read "
            "as 0, not as written")
    with pytest.raises(ConfigError) as refused:
        read_number(text)
    assert str(refused.value) == said
    for argv, option in ((["simulate", "--delta", text], "--delta"),
                         (["privacy", "--eps-agg", "1", "--rounds", "1", "--delta", text],
                          "--delta")):
        with pytest.raises(SystemExit):
            _flag(argv, "unused")
        assert f"argument {option}: {said}" in capsys.readouterr().err


@pytest.mark.parametrize("text, value", [("0", 0.0), ("-0.0", -0.0), ("0e-400", 0.0),
                                         ("3e-324", 5e-324), ("5e-324", 5e-324),
                                         ("0e-99999999999999999999", 0.0), (" -0.0E-7 ", -0.0)])
def test_zero_and_the_smallest_doubles_are_still_read(text: str, value: float) -> None:
    assert read_number(text) == value
