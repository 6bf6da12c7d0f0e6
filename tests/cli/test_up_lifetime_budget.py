"""`fedhh up` with a target over the lifetime budget of its coordinator's devices is refused
before anything starts, naming the options. Before: `fedhh up --eps-agg 1e6` started the
services and every device (35 s on 2 busy cores), then ended with "FAILED_PRECONDITION: a run
of (eps 1000000.0, delta 1e-06) exceeds every device's lifetime budget (eps 10.0, ...)"."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from cli_kit import one_line_error

from fedhh.cli.main import build_parser
from fedhh_coordinator.budgets import LifetimeBudget


@pytest.mark.parametrize("flags, shown", [
    (["--eps-agg", "1e6"], "--eps-agg 1e+06 --delta 1e-06"),
    (["--eps-agg", "10.5"], "--eps-agg 10.5 --delta 1e-06"),
    (["--delta", "1e-4"], "--eps-agg 2 --delta 0.0001"),
    # (before, "--eps-agg 10 --delta 1e-06: more than ... (eps 10, ...)")
    (["--eps-agg", "10.000000000000002"], "--eps-agg 10.000000000000002 --delta 1e-06"),
])
def test_a_target_over_the_lifetime_budget_is_refused_before_anything_starts(
        flags: list[str], shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))  # (the file is imported there)
    users = tmp_path / "users.txt"
    users.write_text("".join(f"apple w{u % 50}\n" for u in range(300)))
    workdir = tmp_path / "work"
    line = one_line_error(["up", "--dataset", str(users), "--workdir", str(workdir), *flags],
                          capsys)
    assert line == (f"fedhh up: error: {shown}: more than the lifetime budget each device of "
                    "the local coordinator holds (eps 10, delta 1e-05 per 30 days), so it "
                    "would refuse the run: give at most --eps-agg 10 and --delta 1e-05")
    assert not workdir.exists()  # no service was started


def test_the_budget_checked_is_the_coordinators_default() -> None:
    """`fedhh up` starts its coordinator without --lifetime-eps, --lifetime-delta or
    --budget-period-days: the check holds while those defaults are ``LifetimeBudget()``'s."""
    parser = build_parser("coordinator")
    coordinator = next(a for a in parser._actions  # (argparse keeps its subparsers private)
                       if isinstance(a, argparse._SubParsersAction)).choices["coordinator"]
    budget = LifetimeBudget()
    assert coordinator.get_default("lifetime_eps") == budget.eps
    assert coordinator.get_default("lifetime_delta") == budget.delta
    assert coordinator.get_default("budget_period_days") * 86400 == budget.period_s
