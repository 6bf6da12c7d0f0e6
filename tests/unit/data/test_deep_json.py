"""A dataset folder's JSON files holding arrays nested 100,000 deep (a damaged or doctored
file), which Python's json reads by recursion: meta.json is refused naming it (DatasetError),
and the caches beside it, truth.json and digest.json, are computed again. Before, each was a
RecursionError traceback out of every command that opened, counted or digested the dataset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.digest import directory_digest
from fedhh.data.truth import ground_truth
from fedhh.errors import DatasetError

DEEP = "[" * 100_000


def _dataset(tmp_path: Path) -> Path:
    return save_dataset(from_user_counts([{"a": 1}, {"a": 1, "b": 2}], name="t"),
                        tmp_path / "d")


def test_a_meta_json_nested_too_deep_is_refused_naming_it(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    (root / "meta.json").write_text(DEEP)
    with pytest.raises(DatasetError) as refused:
        load_dataset(root)
    assert str(refused.value).startswith(f"{root}/meta.json is not valid JSON: maximum "
                                         "recursion depth exceeded")


def test_caches_nested_too_deep_are_computed_again(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    dataset = load_dataset(root)
    truth = ground_truth(dataset)
    digest = directory_digest(root)
    (root / "truth.json").write_text(DEEP)
    (root / "digest.json").write_text(DEEP)
    again = ground_truth(load_dataset(root))
    assert np.array_equal(again.weighted, truth.weighted)
    assert directory_digest(root) == digest
    assert isinstance(json.loads((root / "truth.json").read_text()), dict)  # (rewritten)
