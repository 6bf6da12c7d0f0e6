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
import re
import sqlite3
from pathlib import Path

import pytest

from fedhh.cli.main import build_parser
from fedhh.config import RunConfig
from fedhh.errors import ConfigError, StoreDamaged
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator.runs import RunParts, create_run, newer_settings, stored_config
from fedhh_coordinator.store import Store


def _store(path: Path, edit: str, record: str = "config") -> None:
    """A store holding run 'r' (running) and run 'd' (done), each ``record`` (config, tree or
    ledger) changed by the SQLite expression ``edit`` of it."""
    store = Store(path)
    config = RunConfig(eps_agg=4.0, delta=1e-6, rounds=4, target_devices=400, min_devices=300,
                       completion_rounds=0)

    asyncio.run(create_run(store, config, "r"))
    store.set_run_state("r", "running")
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO runs SELECT 'd', config, 'done', eps_local, tree, ledger, "
                   "deny_codes, error, created_at + 1, updated_at FROM runs")
        db.execute(f"UPDATE runs SET {record} = {edit}")
    db.close()


def _start(path: Path, tmp_path: Path) -> None:
    args = build_parser().parse_args([
        "coordinator", "--insecure", "--aggregator", "127.0.0.1:9", "--db", str(path),
        "--signing-key", str(tmp_path / "signing.pem"), "--listen", "127.0.0.1:0"])
    # (30 s only bounds a failure: a refused start ends before it serves)
    asyncio.run(asyncio.wait_for(coordinator_main.serve(
        args, coordinator_main.Checked(b"c" * 32, b"a" * 32, None)), 30))


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


# (a discovered item as this fedhh writes it, and one more field)
NEWER_ITEM = "json('[{\"code\": 5, \"estimate\": 9.0, \"round\": 1, \"bits\": 0, \"why\": 1}]')"


@pytest.mark.parametrize(("record", "edit", "said"), [
    ("tree", "json_set(tree, '$.new_field', 7)", "its tree state fields 'new_field' are"),
    ("tree", f"json_set(tree, '$.discovered', {NEWER_ITEM})",
     "its tree state fields 'discovered[].why' are"),
    ("ledger", "json_set(ledger, '$.new_field', 7)", "its ledger fields 'new_field' are"),
    ("ledger", "json_set(ledger, '$.version', 3)", "its ledger is version 3, past the 2 this "
     "one reads"),
])
def test_a_tree_state_or_ledger_a_newer_fedhh_wrote_is_refused_as_its_config_is(
        record: str, edit: str, said: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a newer ledger version failed the running run for good as damaged (as a newer
    config did), and a field the readers did not know was dropped: the run went on, and its
    tree state and ledger were written back without it."""
    monkeypatch.setattr(coordinator_main, "import_accountant_libraries", lambda: None)
    path = tmp_path / "c.sqlite"
    _store(path, edit, record)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ConfigError, match=rf"--db .*c\.sqlite: the unfinished run 'r' was "
                       rf"written by a newer fedhh: {re.escape(said)}"):
        _start(path, tmp_path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not (tmp_path / "signing.pem").exists()
    store = Store(path)
    assert (store.run("r").state, store.run("r").error) == ("running", "")
    with pytest.raises(StoreDamaged, match=f"run 'd' was written by a newer fedhh: "
                       f"{re.escape(said)}"):
        RunParts.load(store.run("d"))
    store.close()


@pytest.mark.parametrize(("record", "edit", "said"), [
    ("tree", "json_remove(json_set(tree, '$.donne', 0), '$.done')",
     "tree: tree state fields 'donne' are unknown"),
    ("tree", f"json_remove(json_set(tree, '$.discovered', {NEWER_ITEM}), '$.hints')",
     "tree: discovered item fields 'why' are unknown"),
    ("ledger", "json_remove(json_set(ledger, '$.n_mim', 300), '$.n_min')",
     "ledger: malformed ledger: fields 'n_mim' are unknown"),
])
def test_an_unknown_field_beside_a_missing_one_is_damage(
        record: str, edit: str, said: str, tmp_path: Path) -> None:
    """A field renamed in the file: not a newer fedhh's (which writes every field this one
    knows), and not dropped, as the readers did: the run's records are damaged."""
    path = tmp_path / "c.sqlite"
    _store(path, edit, record)
    store = Store(path)
    with pytest.raises(StoreDamaged, match=f"run 'r' is damaged: {re.escape(said)}"):
        RunParts.load(store.run("r"))
    store.close()
