"""A service waiting for the lock of its state (a coordinator's SQLite store, an aggregation
service's state directory: ``output_paths.hold_lock``) says so once. Before, every poll logged
the warning again: a second `fedhh aggregator` on a held --state-dir logged "waiting for
another service to release the state directory" 10 times in 8 s, about 30 over the minute it
waits."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.output_paths import hold_lock


def test_a_held_lock_is_waited_for_with_one_warning(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "state.lock"
    holder = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    logger = logging.getLogger("test_state_lock_wait_warning")
    try:
        with caplog.at_level(logging.WARNING, logger=logger.name), \
                pytest.raises(ConfigError, match=r"^busy$"):
            # (0.5 s: the polls at 0.1, 0.2 and 0.4 s each warned before)
            hold_lock(path, 0.5, cannot_open="cannot open", busy="busy", waiting="waiting",
                      context={}, logger=logger)
    finally:
        os.close(holder)
    assert [r.getMessage() for r in caplog.records if r.name == logger.name] == ["waiting"]
    taken = hold_lock(path, 0.5, cannot_open="cannot open", busy="busy", waiting="waiting",
                      context={}, logger=logger)
    os.close(taken)
