"""Ground truth: brute force on a tiny dataset, normalization, and the validated cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _data_helpers import TINY_USERS

from fedhh.data.dataset import FederatedDataset, load_dataset, save_dataset
from fedhh.data.truth import (
    TRUTH_META,
    UNWEIGHTED_FILE,
    WEIGHTED_FILE,
    compute_truth,
    ground_truth,
    load_truth,
)
from fedhh.errors import DatasetError


def brute_force(ds: FederatedDataset) -> tuple[np.ndarray, np.ndarray]:
    index = {w: i for i, w in enumerate(ds.vocabulary)}
    weighted = np.zeros(len(index))
    holders = np.zeros(len(index))
    nonempty = [u for u in TINY_USERS if u]
    for user in nonempty:
        total = sum(user.values())
        for word, count in user.items():
            weighted[index[word]] += count / total / len(nonempty)
            holders[index[word]] += 1
    return weighted, holders / len(TINY_USERS)


def test_matches_brute_force(tiny: FederatedDataset) -> None:
    truth = compute_truth(tiny)
    weighted, unweighted = brute_force(tiny)
    np.testing.assert_allclose(truth.weighted, weighted, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(truth.unweighted, unweighted, rtol=1e-12)
    assert truth.weighted.dtype == np.float64
    assert abs(truth.weighted.sum() - 1.0) < 1e-12
    # hand-computed: "cat" is 1/5 of user 0 and all of user 4, over 4 non-empty users
    assert truth.weighted[tiny.vocabulary.index("cat")] == pytest.approx((1 / 5 + 1) / 4)
    assert truth.unweighted[tiny.vocabulary.index("the")] == pytest.approx(2 / 5)
    assert [tiny.vocabulary[i] for i in truth.top(2)] == ["cat", "zebra"]


def test_cache_round_trip_and_recovery(tmp_path: Path, tiny: FederatedDataset) -> None:
    ds = load_dataset(save_dataset(tiny, tmp_path / "ds"))
    first = ground_truth(ds)
    assert (tmp_path / "ds" / WEIGHTED_FILE).exists()
    cached = load_truth(tmp_path / "ds", ds)
    np.testing.assert_array_equal(cached.weighted, first.weighted)
    # A corrupt cache is detected and recomputed.
    np.save(tmp_path / "ds" / WEIGHTED_FILE, np.full(len(ds.vocabulary), 0.5))
    with pytest.raises(DatasetError, match="sums to"):
        load_truth(tmp_path / "ds", ds)
    np.testing.assert_array_equal(ground_truth(ds).weighted, first.weighted)
    (tmp_path / "ds" / WEIGHTED_FILE).write_bytes(b"garbage")
    with pytest.raises(DatasetError, match="unreadable"):
        load_truth(tmp_path / "ds", ds)
    np.testing.assert_array_equal(ground_truth(ds).weighted, first.weighted)
    meta = tmp_path / "ds" / "truth.json"
    meta.write_text(json.dumps({"num_users": 1}))
    with pytest.raises(DatasetError, match=r"truth.json describes"):
        load_truth(tmp_path / "ds", ds)
    np.testing.assert_array_equal(ground_truth(ds).unweighted, first.unweighted)



def test_a_dataset_edited_in_place_to_the_same_sizes_is_counted_again(
        tmp_path: Path, tiny: FederatedDataset) -> None:
    """The cache is keyed by the dataset's contents (their SHA-256), not its sizes alone:
    before, counts.npy rewritten with other counts of the same dtype and length left
    truth.json's sizes true, and the next run was given the former truth."""
    root = save_dataset(tiny, tmp_path / "ds")
    before = ground_truth(load_dataset(root))
    size = (root / "counts.npy").stat().st_size
    np.save(root / "counts.npy", np.load(root / "counts.npy")[::-1].copy())
    assert (root / "counts.npy").stat().st_size == size  # (the same dtype and length)
    edited = load_dataset(root)
    after = ground_truth(edited)
    assert not np.array_equal(after.weighted, before.weighted)
    np.testing.assert_array_equal(after.weighted, compute_truth(edited).weighted)
    np.testing.assert_array_equal(load_truth(root, edited).weighted, after.weighted)  # rewritten
    # The former contents beside the edited one's truth: refused, saying why.
    former = save_dataset(tiny, tmp_path / "former")
    for name in (TRUTH_META, WEIGHTED_FILE, UNWEIGHTED_FILE):
        (former / name).write_bytes((root / name).read_bytes())
    with pytest.raises(DatasetError, match=r"truth\.json was counted from other contents of "
                                           r"the same sizes .*: the dataset was changed since"):
        load_truth(former, load_dataset(former))
