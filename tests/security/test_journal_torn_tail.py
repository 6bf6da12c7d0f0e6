"""An outcome journal whose last line was cut before its newline (a write the process did not
finish): the start drops the part from the journal, as before, but first keeps its bytes in
outcomes.jsonl.torn.N beside it and says where. Before, the start's rewrite erased them and a
warning alone said something had been dropped, so a file damaged at its end lost the evidence.
A complete (newline-terminated) line that does not read is refused, naming file and line."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from fedhh.errors import ConfigError
from fedhh_aggregator.journal import Journal

SESSION = b"s" * 32


def _journal_of_one_round(directory: Path) -> bytes:
    journal = Journal(directory)
    journal.load()
    journal.rewrite()
    try:
        asyncio.run(journal.opened(b"r1", SESSION))
    finally:
        journal.close()
    return (directory / "outcomes.jsonl").read_bytes()


def _start(directory: Path) -> Journal:
    journal = Journal(directory)
    journal.load()
    journal.rewrite()  # as the registry's and the combiner's start do
    return journal


def test_a_torn_last_line_is_kept_beside_the_journal_before_it_is_dropped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    whole = _journal_of_one_round(tmp_path)
    torn = b'{"v": 1, "op": "finish", "round": "7232", "sta'
    (tmp_path / "outcomes.jsonl").write_bytes(whole + torn)
    with caplog.at_level(logging.WARNING, logger="fedhh_aggregator.journal"):
        journal = _start(tmp_path)
    journal.close()
    kept = tmp_path / "outcomes.jsonl.torn.1"
    assert kept.read_bytes() == torn
    assert sorted(journal.records) == [b"r1"]
    assert (tmp_path / "outcomes.jsonl").read_bytes() == whole
    (record,) = [r for r in caplog.records if "interrupted last journal line" in r.message]
    assert str(kept) in record.getMessage() and record.bytes == len(torn)  # type: ignore[attr-defined]


def test_a_start_again_over_the_same_torn_bytes_keeps_one_copy_and_another_gets_its_own(
        tmp_path: Path) -> None:
    whole = _journal_of_one_round(tmp_path)
    journal_file = tmp_path / "outcomes.jsonl"
    journal_file.write_bytes(whole + b'{"v": 1')
    stopped = Journal(tmp_path)
    stopped.load()  # a start that stops before its rewrite: the tail is still there
    stopped.close()
    _start(tmp_path).close()
    journal_file.write_bytes(whole + b'{"v": 1, "op"')
    _start(tmp_path).close()
    assert sorted(p.name for p in tmp_path.glob("outcomes.jsonl.torn.*")) == [
        "outcomes.jsonl.torn.1", "outcomes.jsonl.torn.2"]
    assert (tmp_path / "outcomes.jsonl.torn.2").read_bytes() == b'{"v": 1, "op"'


def test_a_complete_last_line_that_does_not_read_is_refused_naming_it(tmp_path: Path) -> None:
    whole = _journal_of_one_round(tmp_path)
    (tmp_path / "outcomes.jsonl").write_bytes(whole + b'{"v": 1, "op": "fini\n')
    lines = whole.count(b"\n") + 1
    with pytest.raises(ConfigError, match=f"outcomes.jsonl:{lines} is damaged"):
        Journal(tmp_path).load()
    assert (tmp_path / "outcomes.jsonl").read_bytes().endswith(b'"fini\n')
    assert not list(tmp_path.glob("outcomes.jsonl.torn.*"))



class _TornCopyFails:
    """os.open and os.write as they are, but the torn line's copy fails with OSError
    ``error`` at its ``call``: at "open" (a folder not writable), or at "write" after part of
    the line is written (a disk filling up mid-write)."""

    def __init__(self, call: str, error: int) -> None:
        self.call, self.error = call, error
        self.open, self.write = os.open, os.write
        self.copies: set[int] = set()

    def _fail(self, name: object) -> OSError:
        return OSError(self.error, os.strerror(self.error), str(name))

    def fake_open(self, path: Any, *args: Any) -> int:
        if not str(path).endswith(".torn.1"):
            return self.open(path, *args)
        if self.call == "open":
            raise self._fail(path)
        fd = self.open(path, *args)
        self.copies.add(fd)
        return fd

    def fake_write(self, fd: int, data: Any) -> int:
        if fd not in self.copies:
            return self.write(fd, data)
        self.write(fd, bytes(data[:5]))
        raise self._fail(fd)


@pytest.mark.parametrize(("call", "error"), [("write", errno.ENOSPC), ("open", errno.EACCES)])
def test_a_torn_line_that_cannot_be_kept_refuses_the_start_and_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, error: int) -> None:
    # The disk full, or the folder not writable: the start is refused naming the journal, the
    # copy and the reason, the journal keeps its last line, no part of a copy is left, and the
    # state directory's lock is let go (a start once the disk has room goes on at once).
    whole = _journal_of_one_round(tmp_path)
    damaged = whole + b'{"v": 1, "op": "finish", "round": "7232", "sta'
    (tmp_path / "outcomes.jsonl").write_bytes(damaged)
    fails = _TornCopyFails(call, error)
    monkeypatch.setattr(os, "open", fails.fake_open)
    monkeypatch.setattr(os, "write", fails.fake_write)
    with pytest.raises(ConfigError) as refused:
        Journal(tmp_path).load()
    monkeypatch.undo()
    assert str(refused.value) == (
        f"{tmp_path / 'outcomes.jsonl'} ends in an interrupted line (46 bytes) that cannot be "
        f"kept in {tmp_path / 'outcomes.jsonl.torn.1'} before it is dropped: "
        f"{os.strerror(error)}; the journal is left as it is")
    assert (tmp_path / "outcomes.jsonl").read_bytes() == damaged
    assert not list(tmp_path.glob("outcomes.jsonl.torn.*"))
    again = Journal(tmp_path, lock_timeout_s=0.0)
    again.load()
    again.rewrite()
    again.close()
    assert (tmp_path / "outcomes.jsonl.torn.1").read_bytes() == damaged[len(whole):]
    assert (tmp_path / "outcomes.jsonl").read_bytes() == whole
