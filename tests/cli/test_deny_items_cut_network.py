"""A networked run's deny-list items longer than its codes are named as it starts (`fedhh up`,
`fedhh admin start`): a device compares codes, so such an item denies every item whose code
starts as its own does (a URL's sibling with another query). `fedhh simulate` named them with
the dataset's items they deny; a networked run said nothing, and its coordinator knows no
items to name."""

from __future__ import annotations

import pytest

from fedhh.cli.options import warn_deny_items_cut
from fedhh.config import Mode, RunConfig

LONG = "https://example.com/search?q=" + "new+york+" * 40 + "&lang=en"


def test_items_longer_than_the_codes_are_named_and_the_others_not(
        capsys: pytest.CaptureFixture[str]) -> None:
    config = RunConfig(deny_list=(LONG, "short", LONG + "x"), target_devices=100,
                       min_devices=10).validate(Mode.NETWORK)
    assert config.deny_items_cut(Mode.NETWORK) == [LONG, LONG + "x"]
    warn_deny_items_cut(config, "fedhh up")
    lines = capsys.readouterr().err.splitlines()
    bits = config.code_bits(Mode.NETWORK)
    assert len(lines) == 2
    assert all(line.startswith("fedhh up: warning: deny-list item https://example.com/search")
               and f"longer than the codes ({bits} bits)" in line for line in lines)


def test_more_than_five_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    config = RunConfig(deny_list=tuple(f"{LONG}{i}" for i in range(8)), target_devices=100,
                       min_devices=10)
    warn_deny_items_cut(config, "fedhh admin start")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 6
    assert lines[-1] == ("fedhh admin start: warning: 3 more deny-list items are longer than "
                         "the codes")


def test_no_deny_list_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    warn_deny_items_cut(RunConfig(deny_list=("a", "b")), "fedhh up")
    assert capsys.readouterr().err == ""
