"""A negative number in any notation the option types read is an option's value: argparse's
own pattern of one is -5 or -0.5 only, so `--rounds -1e25` and `--eps-agg -inf` were
"expected one argument", naming neither the option's rule nor the number."""

from __future__ import annotations

import pytest

from fedhh.cli.main import NEGATIVE_NUMBER, build_parser


@pytest.mark.parametrize("word", ["-7", "-1_000", "-0.5", "-.5", "-1e25", "-1.5E-3", "-inf",
                                  "-Infinity", "-nan"])
def test_negative_numbers_are_recognised(word: str) -> None:
    assert NEGATIVE_NUMBER.match(word)


@pytest.mark.parametrize("word", ["-e", "-h", "--rounds", "-1e", "-x1", "-infx", "-"])
def test_options_are_not_numbers(word: str) -> None:
    assert not NEGATIVE_NUMBER.match(word)


@pytest.mark.parametrize(("argv", "dest", "value"), [
    (["simulate", "--rounds", "-1e25"], "rounds", -10**25),
    (["simulate", "--eps-agg", "-inf"], None, None),
    (["simulate", "--eps-agg", "-1.5E-3"], "eps_agg", -0.0015),
    (["privacy", "--delta", "1e-6", "--rounds", "-1e25"], None, None),
])
def test_a_negative_number_in_any_notation_is_a_value(
        argv: list[str], dest: str | None, value: float | None,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before, "argument --rounds: expected one argument": argparse's pattern of a negative
    number is -5 or -0.5 only. Now the value reaches the option's type, which refuses it
    naming the number (or, for a run's knob, the validation does)."""
    parser = build_parser(argv[0])
    if dest is not None:
        assert getattr(parser.parse_args(argv), dest) == value
        return
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    err = capsys.readouterr().err
    assert "expected one argument" not in err
    assert argv[-1] in err
