"""A build's temporary folders under Ctrl-C or the CLI's SIGTERM, each signal delivered exactly
as a chosen call returns (`_data_helpers.signal_after`): nothing stays beside the target, and a
dataset being replaced is never lost (before, `atomic_directory` and `ShardedBuilder` made
their folders with mkdtemp outside the ``try`` that removes them, and swapped a dataset for its
replacement in two renames a signal could fall between). The synthetic generator's own cases
are in test_data_synthetic.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _data_helpers import SigtermAsCtrlC, named, signal_after

from fedhh.data.builder import ShardedBuilder
from fedhh.data.dataset import atomic_directory


def test_signal_as_the_temporary_folder_is_made_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "mkdir", signal_after(os.mkdir, named(".d.")))
    with SigtermAsCtrlC(), pytest.raises(KeyboardInterrupt), \
            atomic_directory(tmp_path / "d") as tmp:
        (tmp / "new").write_text("new")  # pragma: no cover - interrupted before
    assert list(tmp_path.iterdir()) == []


def test_signal_between_the_renames_of_a_swap_keeps_one_whole_dataset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal after the old folder is moved aside and before the new one takes its place:
    the swap completes, then the interruption is raised (before: the target was gone and the
    old one left in a hidden folder beside it)."""
    target = tmp_path / "d"
    target.mkdir()
    (target / "old").write_text("old")
    monkeypatch.setattr(os, "replace", signal_after(
        os.replace, lambda source, destination: Path(source) == target))
    with SigtermAsCtrlC(), pytest.raises(KeyboardInterrupt), atomic_directory(target) as tmp:
        (tmp / "new").write_text("new")
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
    assert [p.name for p in target.iterdir()] == ["new"]


def test_a_builder_interrupted_before_its_with_block_leaves_nothing(tmp_path: Path) -> None:
    """``with ShardedBuilder(...)``: an interruption after the constructor returns, before the
    block begins, finds no folder made (the first shard makes it, inside the block)."""
    builder = ShardedBuilder(tmp_path, shard_entries=1)
    assert list(tmp_path.iterdir()) == []
    with builder:
        builder.add_user({"a": 1})
        assert len(list(tmp_path.iterdir())) == 1
    assert list(tmp_path.iterdir()) == []
