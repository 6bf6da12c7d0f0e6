"""The runner and its store: a finished run is never recomputed, an interrupted plan resumes,
and the recorded command reproduces the run."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass
class Computed:
    """The study's plan over seeds 0 and 1, computed once for the module into ``store``
    (populations reused, the default): what its execution reported and returned."""

    store: Path
    plan: list[Any]
    computed: int
    reused: int
    events: list[ProgressEvent]
    records: dict[str, Any]


@pytest.fixture(scope="module")
def computed(tiny_path: Path, tiny: FederatedDataset,
             tmp_path_factory: pytest.TempPathFactory) -> Computed:
    """(Before, four tests computed these runs, or some of them, each for itself: 22 of the 36
    runs of the module.) The tests take copies of its store's entries and leave it as it is."""
    store = tmp_path_factory.mktemp("computed") / "store"
    first = suite(tiny_path, tiny, store)
    plan = first.plan([STUDY], [0, 1])
    events: list[ProgressEvent] = []
    records = first.execute(plan, events.append)
    return Computed(store, plan, first.computed, first.reused, events, records)


def copy_entry(computed: Computed, key: str, store: Path) -> None:
    """The module's stored run ``key`` (both of its files) into ``store``."""
    store.mkdir(parents=True, exist_ok=True)
    for suffix in ("json", "npz"):
        shutil.copy2(computed.store / f"{key}.{suffix}", store / f"{key}.{suffix}")


def test_plan_deduplicates_and_resume_recomputes_nothing(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path, computed: Computed,
        monkeypatch: pytest.MonkeyPatch) -> None:
    plan, events, records = computed.plan, list(computed.events), computed.records
    assert len(plan) == 6  # 3 distinct configurations x 2 seeds
    assert (computed.computed, computed.reused) == (6, 0)
    assert sum(e.rounds for e in events) == sum(r.total_rounds for r in plan)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stored run was recomputed")

    monkeypatch.setattr(experiments_runner, "simulate", fail)
    shutil.copytree(computed.store, tmp_path / "store")
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


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:300])  # a partial copy, a full disk


def _damage_a_member(path: Path) -> None:
    """Flip bytes inside the largest compressed array: the zip's directory still reads."""
    with zipfile.ZipFile(path) as archive:
        member = max(archive.infolist(), key=lambda info: info.compress_size)
    data = bytearray(path.read_bytes())
    middle = member.header_offset + 30 + len(member.filename) + member.compress_size // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        meta = json.loads(path.read_text())
        change(meta)
        path.write_text(json.dumps(meta))
    return edit


DAMAGES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "json not json": ("json", lambda path: path.write_text("{not json")),
    "npz truncated": ("npz", _truncate),
    "npz member damaged": ("npz", _damage_a_member),
    "json without metrics": ("json", _edit(lambda meta: meta.pop("metrics"))),
    "json with only its key": ("json", _edit(lambda meta: [meta.pop(k) for k in list(meta)
                                                           if k != "key"])),
    "json seed not a number": ("json", _edit(lambda meta: meta.update(seed="0"))),
    "json metrics without true positives": (
        "json", _edit(lambda meta: meta["metrics"].pop("true_positives"))),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_unreadable_entry_is_recomputed_with_a_warning_naming_its_file(
        damage: str, tiny_path: Path, tiny: FederatedDataset, tmp_path: Path,
        computed: Computed, caplog: pytest.LogCaptureFixture) -> None:
    s = suite(tiny_path, tiny, tmp_path / "store")
    plan = s.plan([STUDY], [0])[:1]
    first = computed.records[plan[0].key]  # as computed; its entry copied in
    copy_entry(computed, plan[0].key, tmp_path / "store")
    suffix, spoil = DAMAGES[damage]
    damaged = tmp_path / "store" / f"{plan[0].key}.{suffix}"
    spoil(damaged)
    again = suite(tiny_path, tiny, tmp_path / "store")
    record = again.execute(plan)[plan[0].key]
    assert (again.computed, again.reused) == (1, 0)
    assert f"ignoring unreadable stored run {damaged}" in caplog.text
    assert record.metrics == json.loads(json.dumps(first.metrics))
    loaded = ResultStore(tmp_path / "store").load(plan[0].key)  # the store is whole again
    assert loaded is not None and loaded.seed == 0


def test_population_reuse_changes_no_result(tiny_path: Path, tiny: FederatedDataset,
                                            tmp_path: Path, computed: Computed) -> None:
    plain = suite(tiny_path, tiny, tmp_path / "a", reuse_populations=False)
    plan = plain.plan([STUDY], [0, 1])
    a, b = plain.execute(plan), computed.records  # b: the module's, populations reused
    assert plain.computed == 6 and list(b) == [run.key for run in plan]
    for key in a:
        assert np.array_equal(a[key].output_codes, b[key].output_codes)
        assert a[key].metrics == b[key].metrics


def test_recorded_command_reproduces_the_run(tiny_path: Path, tiny: FederatedDataset,
                                             tmp_path: Path, computed: Computed,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    s = suite(tiny_path, tiny, tmp_path / "store")
    run = s.plan([STUDY], [1])[0]
    record = computed.records[run.key]  # as the module's suite computed it
    assert record.command.startswith("fedhh simulate ") and "--seed 1" in record.command
    out = tmp_path / "sim.json"
    assert main(["simulate", *record.argv, "--json", str(out), "--quiet"]) == 0
    payload = json.loads(out.read_text())
    assert payload["metrics"]["true_positives"] == record.metrics["true_positives"]
    assert payload["metrics"]["false_positives"] == record.metrics["false_positives"]
    assert payload["config"] == json.loads(json.dumps(record.data["config"]))
