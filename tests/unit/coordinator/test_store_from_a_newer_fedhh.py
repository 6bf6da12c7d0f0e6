"""A store a later fedhh wrote, opened by this one (a rollback): a run configuration holding
every setting this fedhh knows and more (``runs.newer_settings``). Before, the coordinator
started and its runner failed such an unfinished run for good at once ("the stored run 'r' is
damaged: config: unknown run settings: new_knob"), so the later fedhh, started again, found it
failed; GetRun called a finished one damaged. Now the start is refused naming the run and the
settings, the store left as it is, and a finished run reads as written by a newer fedhh. A
setting renamed in the file (one unknown beside one missing) is still damage: that run fails
alone, as before."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from fedhh.cli.main import build_parser
from fedhh.config import RunConfig
from fedhh.errors import ConfigError, StoreDamaged
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator.runs import create_run, newer_settings, stored_config
from fedhh_coordinator.store import Store


def _store(path: Path, edit: str) -> None:
    """A store holding run 'r' (running) and run 'd' (done), each config changed by the
    SQLite expression ``edit`` of ``config``."""
    store = Store(path)
    config = RunConfig(eps_agg=4.0, delta=1e-6, rounds=4, target_devices=400, min_devices=300,
                       completion_rounds=0)

    asyncio.run(create_run(store, config, "r"))
    store.set_run_state("r", "running")
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO runs SELECT 'd', config, 'done', eps_local, tree, ledger, "
                   "deny_codes, error, created_at + 1, updated_at FROM runs")
        db.execute(f"UPDATE runs SET config = {edit}")
    db.close()


def _start(path: Path, tmp_path: Path) -> None:
    args = build_parser().parse_args([
        "coordinator", "--insecure", "--aggregator", "127.0.0.1:9", "--db", str(path),
        "--signing-key", str(tmp_path / "signing.pem"), "--listen", "127.0.0.1:0"])
    asyncio.run(coordinator_main.serve(args, coordinator_main.Checked(b"c" * 32, b"a" * 32,
                                                                       None)))


def test_a_start_on_a_store_whose_unfinished_run_a_newer_fedhh_wrote_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator_main, "import_accountant_libraries", lambda: None)
    path = tmp_path / "c.sqlite"
    _store(path, "json_set(config, '$.new_knob', 7)")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ConfigError, match=r"--db .*c\.sqlite: the unfinished run 'r' was "
                       r"written by a newer fedhh: its settings 'new_knob' are unknown to this "
                       r"one \(0\.1\.0\); start the fedhh that wrote it"):
        _start(path, tmp_path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not (tmp_path / "signing.pem").exists()  # (nothing of the start kept)
    store = Store(path)
    assert (store.run("r").state, store.run("r").error) == ("running", "")
    with pytest.raises(StoreDamaged, match="run 'd' was written by a newer fedhh: its "
                       "settings 'new_knob' are unknown"):
        stored_config(store.run("d"))
    store.close()


def test_a_renamed_setting_is_damage_not_a_newer_fedhh(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    _store(path, "json_remove(json_set(config, '$.eps_agf', json_extract(config, "
                 "'$.eps_agg')), '$.eps_agg')")
    store = Store(path)
    config = store.run("r").config
    assert newer_settings(config) == []
    with pytest.raises(StoreDamaged, match="run 'r' is damaged: config: unknown run settings: "
                       "eps_agf"):
        stored_config(store.run("r"))
    assert newer_settings(json.loads(json.dumps({**config, "eps_agg": 4.0}))) == ["eps_agf"]
    store.close()
