"""`fedhh privacy --devices 1.6e6` is 1,600,000, as `fedhh simulate` and the other commands
take such a count (before: "argument --devices: must be an integer, got '1.6e6'", for the
notation the README writes its populations in)."""

from __future__ import annotations

import pytest

from fedhh.cli.main import build_parser

BASE = ["privacy", "--eps-agg", "1", "--delta", "1e-6"]


@pytest.mark.parametrize(("given", "read"), [("1.6e6", 1_600_000), ("1e5", 100_000),
                                             ("1600000", 1_600_000), ("4.0", 4)])
def test_integral_scientific_notation_is_the_integer(given: str, read: int) -> None:
    args = build_parser().parse_args([*BASE, "--rounds", "4", "--devices", given])
    assert args.devices == read


@pytest.mark.parametrize(("given", "said"), [
    ("1.5", "must be an integer, got '1.5'"), ("1e-3", "must be an integer, got '1e-3'"),
    ("inf", "must be an integer, got 'inf'"), ("nan", "must be an integer, got 'nan'"),
    ("many", "must be an integer, got 'many'"), ("1", "must be an integer >= 2, got 1"),
])
def test_other_counts_are_refused_as_before(given: str, said: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*BASE, "--rounds", "4", "--devices", given])
    assert said in capsys.readouterr().err
