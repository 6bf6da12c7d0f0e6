"""An outcome journal whose last line was cut before its newline (a write the process did not
finish): the start drops the part from the journal, as before, but first keeps its bytes in
outcomes.jsonl.torn.N beside it and says where. Before, the start's rewrite erased them and a
warning alone said something had been dropped, so a file damaged at its end lost the evidence.
A complete (newline-terminated) line that does not read is refused, naming file and line."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

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
