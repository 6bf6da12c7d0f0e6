"""A run record's ``top_hitters`` list each run's heavy hitters, each row naming its run, as
`fedhh simulate --json` does: with --two-runs, the first run's (which finds most items, the
second run's deny list) then the second's, whose rounds count from 1 again (before, only the
second run's were recorded, with no run named, though the record's metrics count both)."""

from __future__ import annotations

from pathlib import Path

from fedhh.config import RunConfig
from fedhh.data.dataset import FederatedDataset
from fedhh.experiments import ResultStore, Study, StudyVariant, Suite, SuiteSettings

STUDY = Study("runs", 0, "runs", "test study", "-", (
    StudyVariant("2 runs", RunConfig(dim_limit=1 << 16, two_runs=True)),
    StudyVariant("1 run", RunConfig(dim_limit=1 << 16)),
))


def test_each_runs_top_hitters_name_their_run(tiny_path: Path, tiny: FederatedDataset,
                                              tmp_path: Path) -> None:
    suite = Suite(SuiteSettings(str(tiny_path), eps_agg=4.0), ResultStore(tmp_path / "store"),
                  tiny)
    plan = suite.plan([STUDY], [0])
    records = suite.execute(plan)
    two, one = (records[run.key].data["top_hitters"] for run in plan)
    first = [h for h in two if h["run"] == 1]
    assert first and {h["run"] for h in two} <= {1, 2}
    assert two == first + [h for h in two if h["run"] == 2]  # (the first run's, then)
    assert {h["item"] for h in first} >= {"the", "and"}  # (the tiny data's two most common)
    assert one and {h["run"] for h in one} == {1}
