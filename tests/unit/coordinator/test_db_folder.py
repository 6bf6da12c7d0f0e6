"""`fedhh coordinator --db data/coordinator.sqlite` where data/ does not exist yet: the store
makes the folder (as check_db allows), so the lock beside it does too. Before, the lock came
first and the start failed: "cannot open its lock file data/coordinator.sqlite.lock: No such
file or directory"."""

from __future__ import annotations

import os
from pathlib import Path

from fedhh_coordinator.main import check_db, lock_sqlite_store


def test_a_store_in_a_folder_not_made_yet_is_locked_and_made(tmp_path: Path) -> None:
    db = tmp_path / "data" / "deeper" / "coordinator.sqlite"
    check_db(str(db))  # (refuses nothing: the folder can be made)
    held = lock_sqlite_store(str(db), timeout_s=0.3)
    try:
        assert held is not None
        assert (db.parent / "coordinator.sqlite.lock").is_file()
    finally:
        if held is not None:
            os.close(held)
