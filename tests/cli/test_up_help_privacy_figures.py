"""`fedhh up --help` gives the local epsilon its default target allows among the Shakespeare
fleet's n_min, and the completion rounds those devices can budget: the figures the
coordinator's planner gives. Before, it read 4.85 for 4 rounds, the figure from before
completion rounds were on by default (a run prints 4.789 over up to 11 rounds)."""

from __future__ import annotations

import re
from dataclasses import replace

from fedhh.cli import up
from fedhh.config import RunConfig, with_most_completions
from fedhh_coordinator.runs import open_ledger


def test_the_help_gives_the_planners_eps_local_and_completion_rounds() -> None:
    text = " ".join((up.__doc__ or "").split())
    given = re.search(r"eps_agg = ([0-9.]+) \(eps_local ([0-9.]+) per round for the (\d+) main "
                      r"rounds and the (\d+) completion rounds that the ([\d,]+) contributors",
                      text)
    assert given, text
    eps_agg, eps_local, rounds, completions, n_min = given.groups()
    asked = replace(RunConfig(), eps_agg=float(eps_agg), rounds=int(rounds),
                    min_devices=int(n_min.replace(",", "")))
    stored, _ = with_most_completions(asked, open_ledger, lambda ledger: ledger.eps_local)
    assert stored.completion() == int(completions)
    assert f"{open_ledger(stored).eps_local:.2f}" == eps_local
