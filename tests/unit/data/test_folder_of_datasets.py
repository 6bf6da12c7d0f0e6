"""A folder that holds datasets without being one (a working folder and its ./cache, where the
device processes imported their file) given as --dataset: said so, with one of them named.
Before: it was read as LEAF data and refused for the first dataset's meta.json ("'users' must
be a list of strings; it reads as JSON lines, ... name it .jsonl")."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.data.registry import resolve_dataset, source_format
from fedhh.errors import DatasetError


def test_a_folder_of_datasets_is_said_to_be_one(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    users = work / "users.txt"
    users.write_text("\U0001f642 caf\u00e9 https://example.org/a?b=1\nhello \U0001f642\n",
                     encoding="utf-8")
    dataset = resolve_dataset(users, work / "cache")  # (imported into work/cache/imported/...)
    assert dataset.root is not None
    (work / "deny.json").write_text('["hello"]')  # (another JSON file there changes nothing)
    with pytest.raises(DatasetError) as refused:
        source_format(work)
    assert str(refused.value) == (
        f"{work} is no dataset but holds 1 in its folders (a cache?): give one of them, such as "
        f"{dataset.root}, or the file it was made from")
    assert source_format(dataset.root) == "dataset"
    assert resolve_dataset(dataset.root).num_users == 2
