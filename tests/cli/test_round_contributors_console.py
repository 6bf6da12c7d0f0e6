"""The console (`fedhh up`, `fedhh admin wait`) says a released round's contributors, the
reports in its total, and takes the threshold's share of them; the charge, where it differs,
is said as a charge.

A sharded round with a shard lost after unmasking is charged at n_min whatever its total holds
(docs/scaling.md). Before, with 100 reports summed and a charge of 80, the console said
"released: 80 contributors" and the closing explanation "30 of 80 devices (37.5%)": the
RoundSummary carried the charge only (``participants``); it now carries ``contributors`` too."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fedhh.cli.narrator import Narrator
from fedhh.cli.up import _print_results, explain
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.service import _round_summary
from fedhh_coordinator.store import RoundRow

LOST_SHARD = RoundRow("r", 1, 1, "released", "", 80,
                      {"participants": 100, "prefixes": 1, "segment_bits": 16, "kept": 1,
                       "finished": 1, "threshold": 30.0}, 0.0, 12.0)


def test_a_round_charged_at_n_min_is_told_with_the_reports_in_its_total(
        capsys: pytest.CaptureFixture[str]) -> None:
    summary = _round_summary(LOST_SHARD)
    assert (summary.contributors, summary.participants) == (100, 80)
    Narrator()(pb.Run(run_id="r", state="done", rounds=[summary]))
    assert capsys.readouterr().out == ("  round 1 attempt 1: released: 100 contributors "
                                       "(charged at 80), 1 kept, 1 found (12 s)\n")
    config = pb.RunConfig(eps_agg=1.0, delta=1e-6, fp_ratio=0.5, rounds=4)
    run = SimpleNamespace(run_id="r", state="done", error="", eps_spent=1.0, eps_local=2.0,
                          rounds_released=1, config=config, rounds=[summary])
    explain(run, None)
    assert "30 of 100 devices (30.0%) in round 1" in " ".join(capsys.readouterr().out.split())
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=[]))
    [row] = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("    1        1  released")]
    assert row.split()[3] == "100"


def test_a_summary_from_a_coordinator_without_the_field_reads_its_participants(
        capsys: pytest.CaptureFixture[str]) -> None:
    old = pb.RoundSummary(round=2, attempt=1, state="released", participants=90, kept=3,
                          finished=1, seconds=5)
    Narrator()(pb.Run(run_id="r", state="done", rounds=[old]))
    assert capsys.readouterr().out == ("  round 2 attempt 1: released: 90 contributors, "
                                       "3 kept, 1 found (5 s)\n")
    # (a round not released carries no total: 0)
    assert _round_summary(RoundRow("r", 1, 2, "lost", "", 80, {}, 0.0, 1.0)).contributors == 0
