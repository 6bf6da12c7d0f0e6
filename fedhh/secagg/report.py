"""Device reports: 0/1 vectors of the round's dimension, as the sorted indices of their ones.

A randomized report is sparse before masking, so devices hand it over as the strictly increasing
indices of its one bits; :func:`indices_from_dense` converts a dense 0/1 vector. Honest device
code refuses anything else (:class:`InvalidReport`), before computing or sending anything.
"""

from __future__ import annotations

import numpy as np

from fedhh.secagg.errors import InvalidReport

__all__ = ["check_report", "indices_from_dense"]


def indices_from_dense(dense: np.ndarray) -> np.ndarray:
    """The sorted indices of the ones of a dense 0/1 vector; refuses any other entry."""
    arr = np.asarray(dense)
    if arr.ndim != 1:
        raise InvalidReport(f"a dense report must be 1-D, got shape {arr.shape}")
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise InvalidReport(f"a dense report must hold integers 0/1, got dtype {arr.dtype}")
    if arr.size and not np.all((arr == 0) | (arr == 1)):
        raise InvalidReport("a dense report may hold only 0 and 1 entries")
    return np.flatnonzero(arr).astype(np.int64)


def check_report(ones: np.ndarray, dimension: int) -> np.ndarray:
    """Validate a report given as the strictly increasing indices of its one bits."""
    arr = np.asarray(ones)
    if arr.ndim != 1:
        raise InvalidReport(f"report indices must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise InvalidReport(f"report indices must be integers, got dtype {arr.dtype}")
    idx = arr.astype(np.int64)
    if idx[0] < 0 or idx[-1] >= dimension:
        raise InvalidReport(f"report indices must lie in [0, {dimension}), got "
                            f"[{idx.min()}, {idx.max()}]")
    if idx.size > 1 and not np.all(idx[1:] > idx[:-1]):
        raise InvalidReport("report indices must be strictly increasing (a 0/1 vector)")
    return idx
