"""`fedhh coordinator --db PATH`: the store's file is made in a folder that exists, never with
the folders above it. Before, every missing folder was made, so a typo in one
(`--db /data/coordinatr/coordinator.sqlite`) started an empty store and the runs, enrolled
devices and privacy spent seemed lost. Earlier still, the lock beside the store came first and
failed with "cannot open its lock file ...: No such file or directory"; now check_db refuses
the path before either."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh_coordinator.main import check_db, lock_sqlite_store
from fedhh_coordinator.store import Store


def test_a_store_whose_folder_is_missing_is_refused_naming_the_folder(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "deeper" / "coordinator.sqlite"
    with pytest.raises(ConfigError, match=(
            f"^--db {db}: the folder {db.parent} does not exist; the store's file is made, "
            "never a folder \\(a mistyped path would start an empty store: ")):
        check_db(str(db))
    assert list(tmp_path.iterdir()) == []


def test_the_store_itself_makes_no_folder(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "coordinator.sqlite"
    with pytest.raises(ConfigError, match=f"^--db {db}: the folder {db.parent} does not exist"):
        Store(str(db))
    with pytest.raises(ConfigError, match=f"^--db {db}: no coordinator store there"):
        Store(str(db), selector=True)
    assert list(tmp_path.iterdir()) == []


def test_a_new_store_in_an_existing_folder_is_locked_and_made(tmp_path: Path) -> None:
    db = tmp_path / "data" / "coordinator.sqlite"
    db.parent.mkdir()
    check_db(str(db))
    held = lock_sqlite_store(str(db), timeout_s=0.3)
    try:
        assert held is not None
        assert (db.parent / "coordinator.sqlite.lock").is_file()
    finally:
        if held is not None:
            os.close(held)
    store = Store(str(db))
    store.db.close()
    assert db.is_file()
