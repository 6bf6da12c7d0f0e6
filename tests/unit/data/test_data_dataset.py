"""The dataset type and its on-disk format: round trips and corrupt directories."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _data_helpers import TINY_USERS, as_dicts, fingerprint

from fedhh.data.dataset import FederatedDataset, from_user_counts, load_dataset, save_dataset
from fedhh.errors import DatasetError


def test_round_trip(tmp_path: Path, tiny: FederatedDataset) -> None:
    path = save_dataset(tiny, tmp_path / "ds")
    loaded = load_dataset(path)
    assert as_dicts(loaded) == [{k: v for k, v in u.items()} for u in TINY_USERS]
    assert loaded.counts.dtype == np.uint32  # 70000 does not fit uint16
    assert loaded.name == "tiny" and loaded.root == path
    assert loaded.summary()["users_without_items"] == 1
    assert loaded.tokens_per_user().tolist() == [5, 0, 3, 70000, 4]


def test_counts_narrowed_to_uint16(tmp_path: Path) -> None:
    ds = from_user_counts([{"a": 2}, {"b": 1}])
    wide = FederatedDataset(ds.vocabulary, ds.indptr, ds.items, ds.counts.astype(np.int64))
    assert load_dataset(save_dataset(wide, tmp_path / "d")).counts.dtype == np.uint16


def test_save_refuses_invalid_and_leaves_target(tmp_path: Path, tiny: FederatedDataset) -> None:
    target = save_dataset(tiny, tmp_path / "ds")
    before = fingerprint(target)
    bad = FederatedDataset(tiny.vocabulary, tiny.indptr, tiny.items[::-1].copy(), tiny.counts)
    with pytest.raises(DatasetError, match="ascending"):
        save_dataset(bad, target)
    assert fingerprint(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temporary left behind


def _corrupt_cases() -> list[tuple[str, str]]:
    return [
        ("truncated_items", "items.npy"),
        ("wrong_dtype", "items.npy"),
        ("out_of_range", "items.npy"),
        ("zero_count", "counts.npy"),
        ("bad_meta_json", "meta.json"),
        ("meta_wrong_users", "meta.json"),
        ("meta_stats_not_object", "meta.json"),
        ("missing_counts", "counts.npy"),
        ("vocab_duplicate", "vocab.txt"),
        ("vocab_not_utf8", "vocab.txt"),
        ("indptr_decreasing", "indptr.npy"),
    ]


@pytest.mark.parametrize(("case", "culprit"), _corrupt_cases())
def test_corrupt_directory(tmp_path: Path, tiny: FederatedDataset, case: str,
                           culprit: str) -> None:
    root = save_dataset(tiny, tmp_path / "ds")
    if case == "truncated_items":
        data = (root / "items.npy").read_bytes()
        (root / "items.npy").write_bytes(data[: len(data) - 6])
    elif case == "wrong_dtype":
        np.save(root / "items.npy", np.load(root / "items.npy").astype(np.int64))
    elif case == "out_of_range":
        items = np.load(root / "items.npy")
        items[-1] = len(tiny.vocabulary) + 5
        np.save(root / "items.npy", items)
    elif case == "zero_count":
        counts = np.load(root / "counts.npy")
        counts[0] = 0
        np.save(root / "counts.npy", counts)
    elif case == "bad_meta_json":
        (root / "meta.json").write_text("{not json", encoding="utf-8")
    elif case == "meta_wrong_users":
        meta = json.loads((root / "meta.json").read_text())
        meta["num_users"] = 99
        (root / "meta.json").write_text(json.dumps(meta))
    elif case == "meta_stats_not_object":
        meta = json.loads((root / "meta.json").read_text())
        meta["stats"] = [1, 2]
        (root / "meta.json").write_text(json.dumps(meta))
    elif case == "missing_counts":
        (root / "counts.npy").unlink()
    elif case == "vocab_duplicate":
        words = (root / "vocab.txt").read_text().split("\n")
        words[1] = words[0]
        (root / "vocab.txt").write_text("\n".join(words))
    elif case == "vocab_not_utf8":
        (root / "vocab.txt").write_bytes(b"\xff\xfe\n" + (root / "vocab.txt").read_bytes())
    elif case == "indptr_decreasing":
        indptr = np.load(root / "indptr.npy")
        indptr[1], indptr[2] = indptr[2] + 1, indptr[1]
        np.save(root / "indptr.npy", indptr)
    before = fingerprint(root)
    with pytest.raises(DatasetError) as info:
        load_dataset(root)
    assert culprit in str(info.value) or str(root) in str(info.value)
    assert fingerprint(root) == before  # loading never changes anything


def test_not_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"meta.json is missing"):
        load_dataset(tmp_path / "empty")
