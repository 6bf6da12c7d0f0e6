"""The runner and its store: a finished run is never recomputed, an interrupted plan resumes,
and the recorded command reproduces the run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedhh.cli.main import main
from fedhh.config import RunConfig
from fedhh.data.dataset import FederatedDataset
from fedhh.experiments import ResultStore, Study, StudyVariant, Suite, SuiteSettings
from fedhh.experiments import runner as experiments_runner
from fedhh.experiments.runner import ProgressEvent

SMALL = RunConfig(dim_limit=1 << 16)
STUDY = Study("tiny", 0, "tiny", "test study", "-", (
    StudyVariant("multi", SMALL),
    StudyVariant("single", RunConfig(dim_limit=1 << 16, single_item=True)),
    StudyVariant("single again", RunConfig(dim_limit=1 << 16, single_item=True)),  # same run
    StudyVariant("5bit fixed", RunConfig(dim_limit=1 << 16, codec="5bit", rounds=6,
                                  segment_bits=10)),
))


def suite(tiny_path: Path, tiny: FederatedDataset, store: Path, **kwargs: bool) -> Suite:
    return Suite(SuiteSettings(str(tiny_path), eps_agg=4.0), ResultStore(store), tiny, **kwargs)


def test_plan_deduplicates_and_resume_recomputes_nothing(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = suite(tiny_path, tiny, tmp_path / "store")
    plan = first.plan([STUDY], [0, 1])
    assert len(plan) == 6  # 3 distinct configurations x 2 seeds
    events: list[ProgressEvent] = []
    records = first.execute(plan, events.append)
    assert (first.computed, first.reused) == (6, 0)
    assert sum(e.rounds for e in events) == sum(r.total_rounds for r in plan)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stored run was recomputed")

    monkeypatch.setattr(experiments_runner, "simulate", fail)
    again = suite(tiny_path, tiny, tmp_path / "store")
    events.clear()
    reloaded = again.execute(again.plan([STUDY], [0, 1]), events.append)
    assert (again.computed, again.reused) == (0, 6)
    assert {e.kind for e in events} == {"cached"}
    for key, record in records.items():
        assert np.array_equal(reloaded[key].output_codes, record.output_codes)
        assert reloaded[key].metrics == json.loads(json.dumps(record.metrics))


def test_interrupted_plan_keeps_finished_runs(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    s = suite(tiny_path, tiny, tmp_path / "store")
    plan = s.plan([STUDY], [0])
    real = experiments_runner.simulate
    calls = []

    def flaky(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(experiments_runner, "simulate", flaky)
    with pytest.raises(KeyboardInterrupt):
        s.execute(plan)
    store = ResultStore(tmp_path / "store")
    assert [store.has(r.key) for r in plan] == [True, False, False]
    assert not list((tmp_path / "store").glob(".*tmp"))
    monkeypatch.setattr(experiments_runner, "simulate", real)
    resumed = suite(tiny_path, tiny, tmp_path / "store")
    resumed.execute(plan)
    assert (resumed.computed, resumed.reused) == (2, 1)


def test_unreadable_entry_is_recomputed(tiny_path: Path, tiny: FederatedDataset,
                                        tmp_path: Path) -> None:
    s = suite(tiny_path, tiny, tmp_path / "store")
    plan = s.plan([STUDY], [0])[:1]
    s.execute(plan)
    (tmp_path / "store" / f"{plan[0].key}.json").write_text("{not json")
    again = suite(tiny_path, tiny, tmp_path / "store")
    again.execute(plan)
    assert again.computed == 1


def test_population_reuse_changes_no_result(tiny_path: Path, tiny: FederatedDataset,
                                            tmp_path: Path) -> None:
    plain = suite(tiny_path, tiny, tmp_path / "a", reuse_populations=False)
    cached = suite(tiny_path, tiny, tmp_path / "b", reuse_populations=True)
    plan = plain.plan([STUDY], [0, 1])
    a, b = plain.execute(plan), cached.execute(plan)
    for key in a:
        assert np.array_equal(a[key].output_codes, b[key].output_codes)
        assert a[key].metrics == b[key].metrics


def test_recorded_command_reproduces_the_run(tiny_path: Path, tiny: FederatedDataset,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    s = suite(tiny_path, tiny, tmp_path / "store")
    run = s.plan([STUDY], [1])[0]
    record = s.execute([run])[run.key]
    assert record.command.startswith("fedhh simulate ") and "--seed 1" in record.command
    out = tmp_path / "sim.json"
    assert main(["simulate", *record.argv, "--json", str(out), "--quiet"]) == 0
    payload = json.loads(out.read_text())
    assert payload["metrics"]["true_positives"] == record.metrics["true_positives"]
    assert payload["metrics"]["false_positives"] == record.metrics["false_positives"]
    assert payload["config"] == json.loads(json.dumps(record.data["config"]))
