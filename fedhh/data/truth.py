"""Ground-truth item distributions of a dataset, computed chunk by chunk and cached.

- weighted: the average over users of each user's empirical distribution,
  ``p(w) = (1/N) sum_u count_u(w) / total_u``, where N counts the users that hold at least one
  item (a user with no items has no distribution); it sums to 1. This is what weighted data
  selection estimates.
- unweighted: the fraction of all users (including users with no items) that hold the item at
  least once. This is what uniform data selection estimates, up to the 1/distinct_u factor.

Both are float64 arrays indexed by item id. They are cached in the dataset directory as
``truth_weighted.npy`` and ``truth_unweighted.npy`` with ``truth.json`` recording the dataset
they belong to: its sizes and the SHA-256 of its contents (``dataset_contents``); a cache that
fails validation, or was counted from other contents, is recomputed. (Before, the sizes alone:
a dataset edited in place to the same sizes, another seed of a generator or an item renamed,
was given the truth of its former contents.)
"""

from __future__ import annotations

import json
import logging
import os
import weakref
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from fedhh.data.dataset import FederatedDataset, atomic_file, release_pages, user_chunks
from fedhh.data.digest import content_digest
from fedhh.data.progress import Meter
from fedhh.errors import DatasetError

logger = logging.getLogger(__name__)

WEIGHTED_FILE = "truth_weighted.npy"
UNWEIGHTED_FILE = "truth_unweighted.npy"
TRUTH_META = "truth.json"
_CHUNK = 1 << 24
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class GroundTruth:
    """The weighted and unweighted distributions (float64, one entry per item id)."""

    weighted: np.ndarray
    unweighted: np.ndarray

    def top(self, k: int, weighted: bool = True) -> np.ndarray:
        """Ids of the k most frequent items, most frequent first (ties by id)."""
        dist = self.weighted if weighted else self.unweighted
        k = min(k, dist.size)
        return np.lexsort((np.arange(dist.size), -dist))[:k]


def compute_truth(dataset: FederatedDataset, progress: bool = False) -> GroundTruth:
    """Both distributions, streaming over the entries in chunks (with ``progress``, a meter
    counts the entries: `fedhh.data.progress`)."""
    with Meter(progress, f"ground truth of {dataset.name}", dataset.num_entries, " entries",
               unit_scale=True) as meter:
        return _compute_truth(dataset, meter)


def _compute_truth(dataset: FederatedDataset, meter: Meter) -> GroundTruth:
    vocab = len(dataset.vocabulary)
    weighted = np.zeros(vocab, dtype=np.float64)
    holders = np.zeros(vocab, dtype=np.int64)
    nonempty = 0
    indptr = dataset.indptr
    for lo, hi in user_chunks(indptr, _CHUNK):
        a, b = int(indptr[lo]), int(indptr[hi])
        lengths = np.diff(np.asarray(indptr[lo : hi + 1]))
        if b == a:
            continue
        items = np.asarray(dataset.items[a:b])
        counts = np.asarray(dataset.counts[a:b]).astype(np.float64)
        starts = np.asarray(indptr[lo:hi]) - a
        has = lengths > 0
        totals = np.add.reduceat(counts, starts[has])
        nonempty += int(has.sum())
        share = counts / np.repeat(totals, lengths[has])
        weighted += np.bincount(items, weights=share, minlength=vocab)
        holders += np.bincount(items, minlength=vocab)
        release_pages(dataset.items, dataset.counts)
        meter.update(b - a)
    if nonempty:
        weighted /= nonempty
    users = dataset.num_users
    unweighted = holders / users if users else holders.astype(np.float64)
    return GroundTruth(weighted, unweighted)


def exact_weighted_sums(dataset: FederatedDataset, ids: np.ndarray) -> dict[int, Fraction]:
    """``sum_u count_u(w) / total_u`` of each item id ``w`` in ``ids``, exactly: the weighted
    share times the users with items, which is the same for every item, so the sums order and
    tie as the shares do. One pass over the entries; each item's counts are summed by the
    user's total first (integers), so the fractions are as many as an item's distinct
    totals."""
    wanted = np.unique(np.asarray(ids, dtype=np.int64))
    by_total: dict[tuple[int, int], int] = {}
    indptr = dataset.indptr
    for lo, hi in user_chunks(indptr, _CHUNK):
        a, b = int(indptr[lo]), int(indptr[hi])
        if b == a:
            continue
        items = np.asarray(dataset.items[a:b]).astype(np.int64)
        counts = np.asarray(dataset.counts[a:b]).astype(np.int64)
        lengths = np.diff(np.asarray(indptr[lo : hi + 1]))
        has = lengths > 0
        starts = np.asarray(indptr[lo:hi])[has] - a
        totals = np.repeat(np.add.reduceat(counts, starts), lengths[has])
        mask = np.isin(items, wanted)
        if mask.any():
            pairs, where = np.unique(np.stack([items[mask], totals[mask]]), axis=1,
                                     return_inverse=True)
            sums = np.zeros(pairs.shape[1], dtype=np.int64)
            np.add.at(sums, where.ravel(), counts[mask])
            for item, total, count in zip(pairs[0].tolist(), pairs[1].tolist(),
                                          sums.tolist(), strict=True):
                by_total[(item, total)] = by_total.get((item, total), 0) + count
        release_pages(dataset.items, dataset.counts)
    exact = {int(item): Fraction(0) for item in wanted.tolist()}
    for (item, total), count in by_total.items():
        exact[item] += Fraction(count, total)
    return exact


def exact_top(dataset: FederatedDataset, weighted: np.ndarray,
              k: int) -> tuple[np.ndarray, int]:
    """The ``k`` item ids of the largest weighted share (``weighted``, the dataset's float
    truth), most first, items of equal shares by id; and how many items left out hold exactly
    the last one's share (a cut inside a tie). The float shares are sums in another order
    than exact ones: two items held alike (1/2 + 1/6 against 1/3 + 1/3) may differ in their
    last bits, and two items a digit apart at the fifth digit are no tie; so the items whose
    float share lies within the sums' rounding error of the k-th's are ordered by their exact
    sums (``exact_weighted_sums``)."""
    n = weighted.size
    k = min(k, n)
    order = np.lexsort((np.arange(n), -weighted))
    if k <= 0:
        return order[:0], 0
    kth = float(weighted[order[k - 1]])
    # (each share rounded once, summed over at most every user and chunk, then divided: the
    # float differs from the exact share by less than this many units in the last place)
    slack = kth * (dataset.num_users + dataset.num_users // _CHUNK + 4) * 2.0 ** -52
    band = np.flatnonzero(np.abs(weighted - kth) <= slack)
    if band.size <= 1:
        return order[:k], 0
    exact = exact_weighted_sums(dataset, band)
    above = order[:k][weighted[order[:k]] > kth + slack]
    ranked = sorted(band.tolist(), key=lambda item: (-exact[item], item))
    chosen = ranked[:k - above.size]
    tied = sum(1 for item in ranked[k - above.size:] if exact[item] == exact[chosen[-1]])
    return np.concatenate([above, np.asarray(chosen, dtype=order.dtype)]), tied


_CONTENTS: weakref.WeakKeyDictionary[FederatedDataset, str] = weakref.WeakKeyDictionary()


def dataset_contents(dataset: FederatedDataset) -> str:
    """The SHA-256 of ``dataset``'s contents (``fedhh.data.digest.content_digest``), the key of
    every cache computed from them beside the dataset: this ground truth, and the simulator's
    codes and per-code truth. Taken once per loaded dataset: a file changed less than
    ``SETTLE_NS`` before it is digested is not kept in ``digest.json``, and a read-only
    folder keeps none, so each cache would otherwise hash the files again."""
    digest = _CONTENTS.get(dataset)
    if digest is None:
        digest = _CONTENTS[dataset] = content_digest(dataset)
    return digest


def _meta(dataset: FederatedDataset) -> dict[str, int | str]:
    return {
        "num_users": dataset.num_users,
        "num_entries": dataset.num_entries,
        "vocabulary_size": len(dataset.vocabulary),
        "contents": dataset_contents(dataset),
    }


def _check(truth: GroundTruth, dataset: FederatedDataset, where: str) -> None:
    vocab = len(dataset.vocabulary)
    for label, dist in (("weighted", truth.weighted), ("unweighted", truth.unweighted)):
        if dist.dtype != np.float64 or dist.shape != (vocab,):
            raise DatasetError(f"{where}: {label} truth has dtype {dist.dtype} and shape "
                               f"{dist.shape}; expected float64 ({vocab},)")
        if not np.all(np.isfinite(dist)) or np.any(dist < 0) or np.any(dist > 1 + _TOLERANCE):
            raise DatasetError(f"{where}: {label} truth holds values outside [0, 1]")
    total = float(truth.weighted.sum())
    if dataset.num_entries and abs(total - 1.0) > _TOLERANCE:
        raise DatasetError(f"{where}: weighted truth sums to {total}, expected 1")


def load_truth(root: str | os.PathLike[str], dataset: FederatedDataset) -> GroundTruth:
    """Read and validate cached truth files of ``dataset`` stored in ``root``."""
    base = Path(root)
    try:
        meta = json.loads((base / TRUTH_META).read_text(encoding="utf-8"))
        weighted = np.load(base / WEIGHTED_FILE, allow_pickle=False)
        unweighted = np.load(base / UNWEIGHTED_FILE, allow_pickle=False)
    except FileNotFoundError as error:
        raise DatasetError(f"{base}: ground truth file {Path(str(error.filename)).name} is "
                           "missing") from None
    except (ValueError, OSError, EOFError, RecursionError) as error:  # (RecursionError: a
        # truth.json nested thousands deep; before, a traceback instead of a recount)
        raise DatasetError(f"{base}: ground truth files are unreadable: {error}") from None
    expected = _meta(dataset)
    if isinstance(meta, dict) and {k: v for k, v in meta.items() if k != "contents"} \
            == {k: v for k, v in expected.items() if k != "contents"} \
            and meta.get("contents") != expected["contents"]:
        raise DatasetError(f"{base}/{TRUTH_META} was counted from other contents of the "
                           f"same sizes (SHA-256 {str(meta.get('contents'))[:12]}..., the "
                           f"dataset's is {str(expected['contents'])[:12]}...): the dataset "
                           "was changed since")
    if meta != expected:
        raise DatasetError(f"{base}/{TRUTH_META} describes {meta}, the dataset is {expected}")
    truth = GroundTruth(weighted, unweighted)
    _check(truth, dataset, str(base))
    return truth


def save_truth(root: str | os.PathLike[str], dataset: FederatedDataset,
               truth: GroundTruth) -> None:
    """Write the truth files next to the dataset (each file atomically, meta last)."""
    base = Path(root)
    _check(truth, dataset, str(base))
    for name, dist in ((WEIGHTED_FILE, truth.weighted), (UNWEIGHTED_FILE, truth.unweighted)):
        with atomic_file(base / name) as out:
            np.save(out, dist)
    with atomic_file(base / TRUTH_META, "w") as meta:
        meta.write(json.dumps(_meta(dataset)) + "\n")


def ground_truth(dataset: FederatedDataset, root: str | os.PathLike[str] | None = None,
                 progress: bool = False) -> GroundTruth:
    """The dataset's ground truth, from the cache in ``root`` (default: the directory it was
    loaded from) when valid, else computed (``progress``: `compute_truth`) and, where writable,
    cached."""
    base = Path(root) if root is not None else dataset.root
    if base is not None and (base / TRUTH_META).exists():
        try:
            return load_truth(base, dataset)
        except DatasetError as error:
            logger.warning("recomputing ground truth: %s", error)
    truth = compute_truth(dataset, progress)
    if base is not None:
        try:
            save_truth(base, dataset, truth)
        except OSError as error:
            logger.warning("cannot cache ground truth in %s: %s", base, error)
    return truth
