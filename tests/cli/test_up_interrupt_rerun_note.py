"""After Ctrl-C, `fedhh up --workdir W` says what a rerun in W does with the runs its store
holds unfinished, read from the store once the services are stopped: it names the runs a rerun
cancels, and says none was left when Ctrl-C came before any run started. Before, it said a
rerun "cancels the run left unfinished" also when the services were still starting and no run
existed."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fedhh.cli import up
from fedhh.rpc.topology import STORE_FILE
from fedhh_coordinator.db import open_database

KEPT = "fedhh up: the services are stopped; their store, logs and keys are kept in {w}"


def _store(workdir: Path, runs: dict[str, str]) -> None:
    """The coordinator's store in ``workdir`` (its own schema), holding ``runs`` (id: state)."""
    db = open_database(str(workdir / STORE_FILE))
    try:
        with db.transaction() as tx:
            for when, (run_id, state) in enumerate(runs.items()):
                tx.execute("INSERT INTO runs (run_id, config, state, eps_local, tree, ledger, "
                           "deny_codes, created_at, updated_at) VALUES (?, '', ?, 1.0, '', '', "
                           "'', ?, ?)", (run_id, state, when, when))
    finally:
        db.close()


def _interrupted(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> str:
    def ctrl_c(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(up, "_run", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        up.run(argparse.Namespace(workdir=str(workdir)))
    (line,) = capsys.readouterr().err.splitlines()
    return line


@pytest.mark.parametrize("runs", [None, {}, {"demo": "done", "demo-2": "cancelled"}],
                         ids=["no store yet", "no run", "runs ended"])
def test_no_run_left_is_said_so(runs: dict[str, str] | None, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    if runs is not None:
        _store(tmp_path, runs)
    assert _interrupted(tmp_path, monkeypatch, capsys) == KEPT.format(w=tmp_path) + (
        " (no run was left unfinished: a `fedhh up --workdir` there starts its own with them)")


def test_the_runs_left_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path, {"demo": "done", "demo-2": "running"})
    assert _interrupted(tmp_path, monkeypatch, capsys) == KEPT.format(w=tmp_path) + (
        " (run demo-2 left unfinished: a `fedhh up --workdir` there cancels it before it "
        "starts its own)")
    other = tmp_path / "other"
    other.mkdir()
    _store(other, {"demo-2": "running", "demo-3": "pending"})
    assert _interrupted(other, monkeypatch, capsys).endswith(
        " (runs demo-2, demo-3 left unfinished: a `fedhh up --workdir` there cancels them "
        "before it starts its own)")


def test_a_store_that_does_not_read_keeps_the_general_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / STORE_FILE).write_bytes(b"not a database")
    assert _interrupted(tmp_path, monkeypatch, capsys) == KEPT.format(w=tmp_path) + (
        " (a `fedhh up --workdir` there cancels any run left unfinished before it starts its "
        "own)")
