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


@pytest.mark.parametrize("names", [["users.jsonl"], ["b.txt", "a/users.txt"]])
def test_a_folder_of_text_or_json_lines_files_names_one(tmp_path: Path,
                                                        names: list[str]) -> None:
    """A folder holding a .jsonl or .txt dataset file (and no LEAF .json) given as the dataset
    names the file to give instead. Before, it was refused naming no file: "... is neither a
    dataset directory (no meta.json) nor a directory of LEAF .json files"."""
    folder = tmp_path / "data"
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text('["a", "ab"]\n' if name.endswith(".jsonl") else "a ab\n")
    with pytest.raises(DatasetError) as refused:
        source_format(folder)
    first = sorted(folder / name for name in names)[0]
    count = f"{len(names)} text or JSON-lines file{'' if len(names) == 1 else 's'}"
    assert str(refused.value) == (
        f"{folder} is neither a dataset directory (no meta.json) nor a directory of LEAF .json "
        f"files; it holds {count}, which a folder is not read for: give the file itself, such "
        f"as {first}")
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == sorted(
        name.split("/")[-1] for name in names)  # (nothing made beside them)


def test_an_empty_folder_keeps_its_words(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"LEAF \.json files$"):
        source_format(tmp_path)
