""".npz files kept beside a dataset (a codebook's item codes, the per-code truth) or in an
experiments store (a stored run), damaged on disk, are read as missing: the cache is computed
again and rewritten, the run computed again, each with a warning naming the file.

Before, only OSError, ValueError and KeyError were taken as unreadable beside the dataset (the
store took EOFError, zipfile's and zlib's errors too): a truncated or bit-flipped cache raised
zipfile.BadZipFile out of every `fedhh simulate` on the dataset, and a flipped flag in a zip
directory (a compression method zipfile lacks, an "encrypted" bit) NotImplementedError or
RuntimeError out of both."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from test_population_codes_cache import pets

from fedhh.experiments.store import ResultStore, RunRecord
from fedhh.experiments.studies import WARM_START_ALONE

# how -> (what reading the file raised before)
DAMAGES = {
    "empty": "EOFError",
    "half": "BadZipFile",  # (truncated)
    "crc": "BadZipFile",  # (a bit of the last member's data)
    "encrypted": "RuntimeError",  # (the first directory entry's encryption flag)
    "method": "NotImplementedError",  # (its compression method, one zipfile lacks)
}


def damaged(data: bytes, how: str) -> bytes:
    directory = data.index(b"PK\x01\x02")  # (the first central directory entry)
    if how == "empty":
        return b""
    if how == "half":
        return data[:len(data) // 2]
    changed = bytearray(data)
    if how == "crc":
        changed[directory - 1] ^= 1  # (the last byte of the last member)
    elif how == "encrypted":
        changed[directory + 8] |= 1
    else:
        changed[directory + 10] = 99
    return bytes(changed)


@pytest.mark.parametrize("how", list(DAMAGES))
def test_damaged_caches_beside_a_dataset_are_computed_again_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str) -> None:
    root, run = pets(tmp_path)
    with caplog.at_level(logging.WARNING, logger="fedhh.data.dataset"):
        codes, truth_codes = run()  # (missing caches: computed without a word)
    assert caplog.messages == []
    caches = sorted(root.glob("*_v2_*.npz"))
    assert [p.name.split("_v2_")[0] for p in caches] == ["item_codes", "truth_codes"]
    for path in caches:
        path.write_bytes(damaged(path.read_bytes(), how))
    with caplog.at_level(logging.WARNING, logger="fedhh.data.dataset"):
        again, truth_again = run()
    # (before, rebuilt silently: a cache read back damaged may be a failing disk's first sign)
    said = sorted(caplog.messages)
    assert len(said) == 2
    for path, message in zip(caches, said, strict=True):
        assert message.startswith(
            f"ignoring unreadable cache {path} (it is computed again): {DAMAGES[how]}: ")
    assert np.array_equal(again, codes) and np.array_equal(truth_again, truth_codes)
    with np.load(caches[0]) as data:  # (rewritten)
        assert np.array_equal(data["codes"], codes)
    with np.load(caches[1]) as data:
        assert np.array_equal(data["codes"], truth_codes)


@pytest.mark.parametrize("how", list(DAMAGES))
def test_a_damaged_stored_run_is_computed_again_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str) -> None:
    store = ResultStore(tmp_path)
    metrics = {"discovered": 1, "true_positives": 1, "false_positives": 0,
               "false_positive_ratio": 0.0, "weighted": {}, "unweighted": {}}
    store.save(RunRecord("k", 0, [], "(list)", {
        "static": WARM_START_ALONE, "source": "test", "items": 1, "metrics": metrics,
        "dataset": {}, "timings": {}}, {
        "output_codes": np.array([3], np.uint64), "truth_codes": np.array([3, 7], np.uint64),
        "truth_weighted": np.array([0.5, 0.5]), "truth_unweighted": np.array([0.5, 0.5])}))
    assert store.load("k") is not None
    arrays = tmp_path / "k.npz"
    arrays.write_bytes(damaged(arrays.read_bytes(), how))
    with caplog.at_level(logging.WARNING, logger="fedhh.experiments.store"):
        assert store.load("k") is None
    [said] = caplog.messages
    assert said.startswith(f"ignoring unreadable stored run {arrays} (it is computed again): ")


def test_the_unreadable_errors_list_no_error_twice() -> None:
    # (NotImplementedError, listed beside its base RuntimeError, was caught by it anyway; the
    # "method" damage above is still read as missing)
    from fedhh.data.dataset import NPZ_UNREADABLE

    assert [(a.__name__, b.__name__) for a in NPZ_UNREADABLE for b in NPZ_UNREADABLE
            if a is not b and issubclass(a, b)] == []
