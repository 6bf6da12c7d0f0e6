"""Stored state holding JSON nested 100,000 deep (a damaged or doctored file; json reads
arrays by recursion) is said to be damaged, as other damage is: a coordinator's stored run
(StoreDamaged naming the run and the field), an aggregation service's journal line (ConfigError
naming the file and the line, at start), an experiments store's run record (read as missing,
with a warning: computed again). Before, each was a RecursionError: a traceback where those
errors are reported."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fedhh.errors import ConfigError, StoreDamaged
from fedhh.experiments.store import ResultStore
from fedhh_aggregator.journal import Journal
from fedhh_coordinator.store import _object, decoded

DEEP = "[" * 100_000


def test_a_stored_run_nested_too_deep_is_the_store_damaged() -> None:
    with pytest.raises(StoreDamaged) as damaged:
        decoded("run 'r1'", "config", _object, DEEP)
    assert str(damaged.value).startswith("the stored run 'r1' is damaged: config: maximum "
                                         "recursion depth exceeded")


def test_a_journal_line_nested_too_deep_is_the_journal_damaged(tmp_path: Path) -> None:
    (tmp_path / "outcomes.jsonl").write_text(DEEP + "\n")
    with pytest.raises(ConfigError) as damaged:
        Journal(tmp_path).load()
    assert str(damaged.value).startswith(f"{tmp_path / 'outcomes.jsonl'}:1 is damaged "
                                         "(maximum recursion depth exceeded")


def test_a_stored_experiment_run_nested_too_deep_is_computed_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "k.json").write_text(DEEP)
    (tmp_path / "k.npz").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="fedhh.experiments.store"):
        assert ResultStore(tmp_path).load("k") is None
    [said] = caplog.messages
    assert said.startswith(f"ignoring unreadable stored run {tmp_path / 'k.json'} (it is "
                           "computed again): RecursionError: ")


def test_a_previous_report_nested_too_deep_is_written_over(tmp_path: Path) -> None:
    """`fedhh experiments` writing a report where one was: a report.json nested too deep names
    no study folders to remove (as one that is not JSON), and the new report goes on."""
    from fedhh.experiments.report import _remove_previous

    (tmp_path / "report.json").write_text(DEEP)
    (tmp_path / "README.md").write_text("the previous report")
    (tmp_path / "segmentation").mkdir()
    _remove_previous(tmp_path, set())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "segmentation"]
