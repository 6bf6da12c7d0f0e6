"""A stored run whose arrays are readable but no run's (a hand edit, arrays of another run) is
treated as missing, with a warning naming the file and the defect, and computed again. Before,
only an .npz that could not be read was: frequencies of another length than the codes, or codes
out of order, were read as they were and paired frequencies with other codes in the curves,
without a word."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from fedhh.experiments.store import ResultStore, RunRecord
from fedhh.experiments.studies import WARM_START_ALONE

METRICS = {"discovered": 2, "true_positives": 2, "false_positives": 0,
           "false_positive_ratio": 0.0, "weighted": {}, "unweighted": {}}


def _arrays() -> dict[str, np.ndarray]:
    return {"output_codes": np.array([3, 7], np.uint64),
            "truth_codes": np.array([1, 3, 7], np.uint64),
            "truth_weighted": np.array([0.5, 0.3, 0.2]),
            "truth_unweighted": np.array([0.6, 0.4, 0.1])}


def _stored(tmp_path: Path) -> ResultStore:
    store = ResultStore(tmp_path)
    store.save(RunRecord("k", 0, [], "(list)", {
        "static": WARM_START_ALONE, "source": "test", "items": 2, "metrics": METRICS,
        "dataset": {}, "timings": {}}, _arrays()))
    return store


@pytest.mark.parametrize(("change", "defect"), [
    ({"truth_weighted": np.array([0.5, 0.3])},
     "'truth_weighted' holds 2 float64 values for 3 codes"),
    ({"truth_unweighted": np.array([1, 0, 0])},
     "'truth_unweighted' holds 3 int64 values for 3 codes"),
    ({"truth_codes": np.array([1, 7, 3], np.uint64)}, "'truth_codes' is not in ascending order"),
    ({"output_codes": np.array([[3, 7]], np.uint64)}, "'output_codes' has 2 dimensions, not 1"),
    ({"output_codes": np.array([b"ab"])}, "its codes are |S2 and uint64, not one kind of code"),
])
def test_arrays_that_are_no_runs_are_computed_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, change: dict[str, np.ndarray],
        defect: str) -> None:
    store = _stored(tmp_path)
    assert store.load("k") is not None
    np.savez_compressed(tmp_path / "k.npz", **{**_arrays(), **change})
    with caplog.at_level(logging.WARNING, logger="fedhh.experiments.store"):
        assert store.load("k") is None
    assert caplog.messages == [f"ignoring unreadable stored run {tmp_path / 'k.npz'} (it is "
                               f"computed again): {defect}"]
