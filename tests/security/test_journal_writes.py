"""The outcome journal's writes when the system refuses one (probe 42, stored state).

The disk full: a line whose write failed part way is cut off again, so the lines written once
there is room again follow whole lines. Before, the part that fit stayed, the next line was
appended to it, and the next start refused the journal as damaged in its middle ("move the
file away": the record of every round lost). Seen on a 64 KiB tmpfs filled by another file;
here the disk's answer is imitated (the part that fits is written, then ENOSPC), so the test
needs no mount. And a compaction that fails after its rename (below)."""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh_aggregator import journal as journal_module
from fedhh_aggregator.journal import Journal

SESSION = b"s" * 32


def _fills_up(real=journal_module._write_all):  # type: ignore[no-untyped-def]
    """A ``_write_all`` that writes half of the data, then fails as a full disk does."""
    def write_all(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return write_all


def _journal(directory: Path) -> Journal:
    journal = Journal(directory)
    journal.load()
    journal.rewrite()  # as the registry's and the combiner's start do
    return journal


def test_a_write_the_disk_cut_short_leaves_no_part_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = _journal(tmp_path)

    async def rounds() -> None:
        await journal.opened(b"r1", SESSION)
        with monkeypatch.context() as full:
            full.setattr(journal_module, "_write_all", _fills_up())
            with pytest.raises(OSError, match="No space left"):
                await journal.opened(b"r2", SESSION)
        journal.records.pop(b"r2")  # (the registry's answer to the refusal)
        await journal.opened(b"r3", SESSION)
        await journal.unmask_started(b"r3")

    try:
        asyncio.run(rounds())
    finally:
        journal.close()
    assert (tmp_path / "outcomes.jsonl").read_bytes().count(b"\n") == 3
    loaded = Journal(tmp_path).load()  # before: ConfigError, outcomes.jsonl:2 is damaged
    assert sorted(loaded) == [b"r1", b"r3"] and loaded[b"r3"].unmask_started


def test_a_part_that_could_not_be_cut_at_once_is_cut_before_the_next_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = _journal(tmp_path)
    real_truncate = os.ftruncate
    refusals = []

    def refuse_once(fd: int, length: int) -> None:
        if not refusals:
            refusals.append(length)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_truncate(fd, length)

    async def rounds() -> None:
        await journal.opened(b"r1", SESSION)
        monkeypatch.setattr(journal_module.os, "ftruncate", refuse_once)
        with monkeypatch.context() as full:
            full.setattr(journal_module, "_write_all", _fills_up())
            with pytest.raises(OSError, match="No space left"):
                await journal.opened(b"r2", SESSION)
        journal.records.pop(b"r2")
        await journal.opened(b"r3", SESSION)

    try:
        asyncio.run(rounds())
    finally:
        journal.close()
    assert len(refusals) == 1
    assert sorted(Journal(tmp_path).load()) == [b"r1", b"r3"]


def test_a_compaction_whose_directory_cannot_be_opened_keeps_appending_to_the_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite renames its file over the journal, then opens the directory to fsync the
    rename: that open failing (EMFILE, the process's descriptors all taken) left the appends
    going to the replaced file, unlinked, so every later round was missing after a restart
    (a journaling aggregator's unknown round is one it never opened, to the coordinator:
    free, even if it reached unmasking)."""
    journal = _journal(tmp_path)
    real_open = os.open

    def no_descriptors_for_the_directory(path, flags, *args):  # type: ignore[no-untyped-def]
        if Path(path) == tmp_path:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_open(path, flags, *args)

    async def rounds() -> None:
        await journal.opened(b"r1", SESSION)
        with monkeypatch.context() as short:
            short.setattr(journal_module.os, "open", no_descriptors_for_the_directory)
            with pytest.raises(OSError, match="Too many open files"):
                journal._rewrite(list(journal.records.values()))  # (as keep_only compacts)
        await journal.opened(b"r2", SESSION)
        await journal.unmask_started(b"r2")

    try:
        asyncio.run(rounds())
    finally:
        journal.close()
    loaded = Journal(tmp_path).load()
    assert sorted(loaded) == [b"r1", b"r2"] and loaded[b"r2"].unmask_started


def test_a_start_that_cannot_rewrite_the_journal_says_which_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = _journal(tmp_path)
    asyncio.run(journal.opened(b"r1", SESSION))
    journal.close()
    before = (tmp_path / "outcomes.jsonl").read_bytes()
    restarted = Journal(tmp_path)
    restarted.load()
    monkeypatch.setattr(journal_module, "_write_all", _fills_up())
    with pytest.raises(ConfigError) as refused:  # before: OSError, "No space left on device"
        restarted.rewrite()
    restarted.close()
    assert str(refused.value) == (f"cannot rewrite the outcome journal "
                                  f"{tmp_path / 'outcomes.jsonl'}: No space left on device "
                                  "(it is left as it was)")
    assert (tmp_path / "outcomes.jsonl").read_bytes() == before
    assert not (tmp_path / "outcomes.jsonl.tmp").exists()


@pytest.mark.parametrize("failing", ["file", "folder"])
def test_a_failed_rewrite_says_truly_whether_the_journal_was_replaced(
        failing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fsync of the new file fails (before the rename: the journal is left as it was), or
    that of its folder (after it: the new file is the journal, not durably yet). Before, both
    said "(it is left as it was)", though after the rename the journal had been replaced."""
    journal = _journal(tmp_path)
    asyncio.run(journal.opened(b"r1", SESSION))
    journal.close()
    path = tmp_path / "outcomes.jsonl"
    before = path.read_bytes()
    restarted = Journal(tmp_path)
    restarted.load()
    restarted.settle(b"r1", "lost at a restart")  # (what the rewrite writes)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode) == (failing == "folder"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    with monkeypatch.context() as failing_sync:
        failing_sync.setattr(journal_module.os, "fsync", fsync)
        with pytest.raises(ConfigError) as refused:
            restarted.rewrite()
    try:
        if failing == "file":
            assert str(refused.value) == (f"cannot rewrite the outcome journal {path}: "
                                          "Input/output error (it is left as it was)")
            assert path.read_bytes() == before
        else:
            assert str(refused.value) == (
                f"the outcome journal {path} was rewritten, but not durably: Input/output "
                "error syncing the journal's folder once its new file had replaced it (the "
                "new file is in use; a crash before the folder is synced may bring back the "
                "previous one)")
            assert path.read_bytes() != before
            asyncio.run(restarted.opened(b"r2", SESSION))  # (appended to the new file)
        assert not (tmp_path / "outcomes.jsonl.tmp").exists()
    finally:
        restarted.close()
    loaded = Journal(tmp_path).load()
    assert (loaded[b"r1"].state == "aborted") == (failing == "folder")
    assert (b"r2" in loaded) == (failing == "folder")


def test_a_state_path_of_the_wrong_kind_is_named_for_what_it_is(tmp_path: Path) -> None:
    """Before: a --state-dir that is a file was 'cannot read the state directory D: File
    exists', and a journal that is a folder 'cannot read the state directory D: Is a
    directory', naming the folder that is one."""
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ConfigError) as refused:
        Journal(tmp_path / "file").load()
    assert str(refused.value) == f"the state directory {tmp_path / 'file'} is a file, not a folder"
    (tmp_path / "state" / "outcomes.jsonl").mkdir(parents=True)
    with pytest.raises(ConfigError) as refused:
        Journal(tmp_path / "state").load()
    assert str(refused.value) == (f"cannot read the journal {tmp_path / 'state' / 'outcomes.jsonl'}"
                                  ": Is a directory")


def test_a_link_at_the_rewrite_temporary_is_not_followed(tmp_path: Path) -> None:
    """The compaction writes ``outcomes.jsonl.tmp`` made new: a symbolic link left at that
    name is replaced, not followed. Before (O_TRUNC through the link), the file it named was
    emptied and overwritten with the journal's lines."""
    journal = _journal(tmp_path)
    asyncio.run(journal.opened(b"r1", SESSION))
    journal.close()
    victim = tmp_path.parent / f"{tmp_path.name}-elsewhere.txt"
    victim.write_text("precious\n")
    (tmp_path / "outcomes.jsonl.tmp").symlink_to(victim)
    restarted = Journal(tmp_path)
    restarted.load()
    try:
        restarted.rewrite()
        asyncio.run(restarted.opened(b"r2", SESSION))
    finally:
        restarted.close()
    assert victim.read_text() == "precious\n"
    written = tmp_path / "outcomes.jsonl"
    assert not written.is_symlink()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert sorted(Journal(tmp_path).load()) == [b"r1", b"r2"]
