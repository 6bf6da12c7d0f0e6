"""resolve_dataset: built-in names, paths, conversions cached once, corrupt directories."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from _data_helpers import fingerprint

from fedhh.data.dataset import FederatedDataset, save_dataset
from fedhh.data.registry import (
    BUILTINS,
    cache_root,
    describe_datasets,
    resolve_dataset,
    resolve_dataset_path,
)
from fedhh.errors import DatasetError


def test_cache_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FEDHH_CACHE", raising=False)
    assert cache_root() == tmp_path / "cache"
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root(tmp_path / "explicit") == tmp_path / "explicit"


def test_builtin_shakespeare_built_once(tmp_path: Path) -> None:
    ds = resolve_dataset("shakespeare", tmp_path)
    assert ds.name == "shakespeare" and ds.num_users > 1000
    root = resolve_dataset_path("shakespeare", tmp_path)
    before = fingerprint(root)
    resolve_dataset("shakespeare", tmp_path)
    assert fingerprint(root) == before
    rows = {r["name"]: r for r in describe_datasets(tmp_path)}
    assert rows["shakespeare"]["cached"] and set(rows) == set(BUILTINS)


def test_text_and_leaf_paths_are_converted_once(tmp_path: Path) -> None:
    text = tmp_path / "users.txt"
    text.write_text("a b a\nc\n", encoding="utf-8")
    ds = resolve_dataset(text, tmp_path / "cache")
    assert ds.num_users == 2 and ds.vocabulary == ("a", "b", "c")
    first = resolve_dataset_path(text, tmp_path / "cache")
    assert first == resolve_dataset_path(text, tmp_path / "cache")
    assert first.parent == tmp_path / "cache" / "imported"
    leaf = tmp_path / "leaf"
    leaf.mkdir()
    (leaf / "r.json").write_text(json.dumps(
        {"users": ["u"], "user_data": {"u": {"x": ["x y"], "y": [{}]}}}))
    assert resolve_dataset(leaf, tmp_path / "cache").vocabulary == ("x", "y")


def test_a_file_rewritten_with_its_old_size_and_time_is_converted_again(
        tmp_path: Path) -> None:
    """Before: the fingerprint was the path, size and modification time, so a file rewritten
    to the same size with its time set back (`touch -d`, `cp -p`, `rsync -a`) kept the old
    conversion: the items of the file before."""
    text = tmp_path / "users.txt"
    old_time = (1_700_000_000_000_000_000, 1_700_000_000_000_000_000)
    text.write_text("aaa bbb\nccc\n", encoding="utf-8")
    os.utime(text, ns=old_time)
    assert resolve_dataset(text, tmp_path / "cache").vocabulary == ("aaa", "bbb", "ccc")
    changed = text.stat().st_ctime_ns
    text.write_text("xxx yyy\nzzz\n", encoding="utf-8")
    os.utime(text, ns=old_time)
    deadline = time.monotonic() + 10
    while text.stat().st_ctime_ns == changed:  # (a coarse clock: milliseconds apart)
        assert time.monotonic() < deadline
        os.utime(text, ns=old_time)
    assert resolve_dataset(text, tmp_path / "cache").vocabulary == ("xxx", "yyy", "zzz")


def test_dataset_directory_and_errors(tmp_path: Path, tiny: FederatedDataset) -> None:
    root = save_dataset(tiny, tmp_path / "ds")
    assert resolve_dataset(root).num_users == tiny.num_users
    np.save(root / "items.npy", np.zeros(2, dtype=np.float32))
    with pytest.raises(DatasetError, match=r"items.npy"):
        resolve_dataset(root)
    with pytest.raises(DatasetError, match="not a built-in dataset"):
        resolve_dataset("no-such-dataset", tmp_path)
    (tmp_path / "data.csv").write_text("a,b\n")
    # (before, it pointed at `data import --format`, which has no CSV format either)
    with pytest.raises(DatasetError, match=r"unknown dataset file type .*no format reads "
                                           r"columns: write each user's items as one JSON array"):
        resolve_dataset(tmp_path / "data.csv", tmp_path)
    (tmp_path / "data.dat").write_text("a b\n")
    with pytest.raises(DatasetError, match=r"--format text\|jsonl\|leaf`$"):
        resolve_dataset(tmp_path / "data.dat", tmp_path)
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(DatasetError, match="neither a dataset directory"):
        resolve_dataset(tmp_path / "emptydir", tmp_path)


def test_corrupt_cached_builtin_is_reported(tmp_path: Path) -> None:
    root = resolve_dataset_path("shakespeare", tmp_path)
    (root / "counts.npy").write_bytes(b"\x93NUMPY broken")
    with pytest.raises(DatasetError, match=r"delete .* to rebuild"):
        resolve_dataset("shakespeare", tmp_path)


def test_an_empty_dataset_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    # (it named the current folder, searched for LEAF files: 8 s from /tmp, then an error
    # about some JSON file there)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "unrelated.json").write_text("[]")
    for empty in ("", "  "):
        with pytest.raises(DatasetError, match="the dataset is empty"):
            resolve_dataset_path(empty, tmp_path / "cache")
