"""`fedhh up`'s warning on items past the run's codes figures its cost with the plan its
target check solved while the services started (``TargetCheck``): the main thread, before any
device starts, solves only the wider plan the warning names. Before, it solved the run's own
plan again there (0.5-2 s a solve on a busy 2-core machine)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from test_run_items_past_the_codes import FakeTopology, Started, _users, _write

import fedhh_coordinator.runs as runs
from fedhh.config import RunConfig
from fedhh.rpc import topology


def test_up_solves_the_runs_plan_once_for_its_warning_on_items_past_the_codes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.main import main

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(topology, "LocalTopology", FakeTopology)
    solved: list[tuple[bool, RunConfig]] = []  # (on the main thread, the config solved)
    real = runs.open_ledger

    def counted(config: RunConfig) -> Any:
        solved.append((threading.current_thread() is threading.main_thread(), config))
        return real(config)

    monkeypatch.setattr(runs, "open_ledger", counted)
    data = _write(tmp_path, _users(300))
    with pytest.raises(Started):
        main(["up", "--dataset", str(data), "--insecure", "--devices", "200",
              "--completion-rounds", "0"])  # (none dropped: the warning figures a cost)
    err = capsys.readouterr().err
    assert "longer than this run's codes" in err and "; the cost: " in err  # (figured)
    planned = [config for on_main, config in solved if not on_main]
    on_main = [config for main_thread, config in solved if main_thread]
    # (the wider plan alone: the old code solved the target check's plan there once more)
    assert len(on_main) == 1 and on_main[0] not in planned, (len(on_main), len(planned))
