"""A dataset's content digest (fedhh.data.digest): of its files, cached by their stamps, and an
edit of the same size, its modification time set back, seen; a cache that cannot be read or
written changes no digest."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _data_helpers import TINY_USERS

from fedhh.data import digest
from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.digest import CACHE_FILE, CONTENT_FILES, content_digest, directory_digest
from fedhh.errors import DatasetError


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    return save_dataset(from_user_counts(TINY_USERS, name="tiny"), tmp_path / "tiny")


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files hashed (not read from the cache), in order."""
    names: list[str] = []
    real = digest._hashed

    def counting(path: Path, *args: Any) -> dict[str, Any]:
        names.append(path.name)
        return real(path, *args)

    monkeypatch.setattr(digest, "_hashed", counting)
    return names


def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written just now taken as settled: the digest's clock a minute ahead."""
    real = time.time_ns
    monkeypatch.setattr(digest.time, "time_ns", lambda: real() + 60 * 10**9)


def test_an_edit_of_the_same_size_with_its_time_set_back_gives_another_digest(
        saved: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    settled(monkeypatch)
    first = directory_digest(saved)
    assert hashed == list(CONTENT_FILES) and (saved / CACHE_FILE).is_file()
    hashed.clear()
    assert directory_digest(saved) == first and hashed == []  # the cache: nothing hashed
    path = saved / "counts.npy"
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[-4:] = np.array([5], dtype="<u4").tobytes()  # the last user's count of "cat": 4 -> 5
    # Rewritten in place (same inode, same size), its modification time set back, until the
    # change time differs from the cached one (the kernel's clock ticks in milliseconds).
    deadline = time.monotonic() + 30
    while path.stat().st_ctime_ns == before.st_ctime_ns and time.monotonic() < deadline:
        with open(path, "r+b") as out:
            out.write(data)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == \
        (before.st_size, before.st_mtime_ns, before.st_ino)
    assert directory_digest(saved) != first and hashed == ["counts.npy"]
    assert load_dataset(saved).counts[-1] == 5


def test_files_changed_just_now_are_not_cached(saved: Path, hashed: list[str]) -> None:
    """A write within the timestamp tick of the hash would leave the stamp as it was."""
    first = directory_digest(saved)
    assert not (saved / CACHE_FILE).exists()
    assert directory_digest(saved) == first and hashed == list(CONTENT_FILES) * 2


@pytest.mark.parametrize("cache", ["not json {", '{"version": 1, "files": []}',
                                   '{"version": 1, "files": {"vocab.txt": {"stamp": '
                                   '[1.5, 2, 3, 4], "sha256": "00"}}}', "[]"])
def test_a_cache_that_cannot_be_read_changes_no_digest(
        saved: Path, cache: str, hashed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    settled(monkeypatch)
    expected = directory_digest(saved)
    (saved / CACHE_FILE).write_text(cache, encoding="utf-8")
    hashed.clear()
    assert directory_digest(saved) == expected and hashed == list(CONTENT_FILES)


def test_a_cache_that_cannot_be_written_changes_no_digest(
        saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settled(monkeypatch)
    expected = content_digest(load_dataset(saved))

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    (saved / CACHE_FILE).unlink()
    monkeypatch.setattr(digest, "atomic_file", read_only)
    assert directory_digest(saved) == expected and not (saved / CACHE_FILE).exists()


def test_a_missing_file_is_named(saved: Path) -> None:
    (saved / "items.npy").unlink()
    with pytest.raises(DatasetError, match=r"items\.npy: cannot read it to digest"):
        directory_digest(saved)


def test_in_memory_datasets_are_digested_from_their_arrays(saved: Path) -> None:
    users = [dict(u) for u in TINY_USERS]
    same = content_digest(from_user_counts(users))
    assert content_digest(from_user_counts(users, name="other name")) == same
    users[-1]["cat"] = 5
    assert content_digest(from_user_counts(users)) != same
    assert content_digest(load_dataset(saved)) != same  # (files and arrays never share one)
