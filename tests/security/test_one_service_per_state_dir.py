"""One aggregation service per --state-dir (probe 37).

Before, a second aggregator (or worker, or combiner) given the state directory of a running one
started beside it: both appended to ``outcomes.jsonl``, and each rewrite (compaction) replaced
the file with its own records while the other went on appending to the replaced one, so a
round's ``unmask`` line, what tells the coordinator that shares may have been revealed, could
be lost. Now the journal holds an exclusive lock on ``DIR/outcomes.lock`` while it is open; a
second service waits up to 60 s for it, then refuses, naming the directory."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.topology import LocalTopology
from fedhh_aggregator.journal import Journal

pytestmark = pytest.mark.slow


def test_a_state_directory_is_held_by_one_journal(tmp_path: Path) -> None:
    first = Journal(tmp_path / "state")
    first.load()
    second = Journal(tmp_path / "state", lock_timeout_s=0.3)
    with pytest.raises(ConfigError) as refused:
        second.load()
    assert str(refused.value) == (
        f"another service holds the state directory {tmp_path / 'state'} (its lock "
        f"{tmp_path / 'state' / 'outcomes.lock'}) after 0.3 s: each aggregator, worker and "
        "combiner needs a --state-dir of its own")
    first.close()
    second.load()  # free once the first is closed
    second.close()


def test_a_damaged_journal_does_not_keep_the_directory(tmp_path: Path) -> None:
    (tmp_path / "outcomes.jsonl").write_text("not json\n")
    with pytest.raises(ConfigError, match="is damaged"):
        Journal(tmp_path).load()
    (tmp_path / "outcomes.jsonl").unlink()
    journal = Journal(tmp_path, lock_timeout_s=0.3)
    journal.load()
    journal.close()


def test_an_aggregator_waits_for_a_held_state_dir(tmp_path: Path) -> None:
    """A real aggregator process started on a directory this test's journal holds (standing
    for a running aggregator) waits, serving nothing, and starts once it is released."""
    shared = tmp_path / "shared"
    holder = Journal(shared)
    holder.load()
    started: list[object] = []
    with LocalTopology(tmp_path / "topology", tls=False,
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        thread = threading.Thread(target=lambda: started.append(
            topo.start_aggregator(["--state-dir", str(shared)])))
        thread.start()
        log = topo.workdir / "aggregator.log"
        deadline = time.monotonic() + 120
        try:
            while "waiting for another service to release the state directory" not in (
                    log.read_text() if log.exists() else ""):
                assert time.monotonic() < deadline and thread.is_alive(), \
                    "the aggregator neither waited nor failed"
                time.sleep(0.05)  # polling the child's log
            assert not started  # not ready while the directory is held
        finally:
            holder.close()
        thread.join(120)
        assert started and topo.services["aggregator"].ready["port"] > 0
