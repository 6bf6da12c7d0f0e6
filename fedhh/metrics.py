"""Utility metrics of a discovered heavy-hitter set against the ground truth.

Ground truth is kept per *code* (items that encode identically are one item to any algorithm;
with the lossless codecs that happens only to items longer than ``max_bits``, truncated to the
same bits). Codes are arrays of ``fedhh.codec.codes`` (uint64 up to 64 bits, byte strings of
big-endian words beyond); an output may also be given as a list of integers.
Two distributions are reported, as in the paper: the weighted one (the average of the users'
empirical distributions, the paper's global empirical distribution D^) and the unweighted one
(the fraction of users holding the item; the paper's footnote and Appendix "Additional
Experimental Results").

For an output H (ordered by true frequency) and the true ranking x*_1, x*_2, ...:

- true positives: items of H held by at least one user (frequency > 0); false positives: the rest,
  i.e. items no device could have sent (the paper's definition in Section "Server Algorithm").
  H is the paper's output (its Algorithm 1 returns the deny list with what the rounds found), so
  a deny-list item held by a user is a true positive though no round found it; ``whole_items``
  counts what the rounds found alone;
- weight ratio WR(H) = sum_{x in H} p(x) / sum_{i <= |H|} p(x*_i) and utility loss 1 - WR(H)
  (Appendix "Adaptive Segmentation Exploration");
- recall of the true top-k for several k, each k whose top is not a smaller k's again
  (``reached_ranks``: over 10 items, the top 10 alone), null at the others, whose key stays
  (``recall_at_null`` says why in words);
- the marginal discovered-frequency curve: for each i, the sum of p over the sliding window
  (x_{i-W}, ..., x_i) of H ordered by true frequency, and the same for the true top list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedhh.codec import codes as cw
from fedhh.data.dataset import FederatedDataset, release_pages, user_chunks
from fedhh.data.progress import Meter

TOP_K = (10, 100, 1000, 10000)
WINDOW = 50


@dataclass(frozen=True)
class Truth:
    """True frequencies per distinct code: ``codes`` ascending, and parallel arrays."""

    codes: np.ndarray
    weighted: np.ndarray
    unweighted: np.ndarray

    @staticmethod
    def from_items(
        item_codes: np.ndarray,
        weighted: np.ndarray,
        unweighted: np.ndarray,
        dataset: FederatedDataset | None = None,
        progress: bool = False,
    ) -> Truth:
        """Aggregate per-item truth to codes.

        Weighted frequencies add up. A user holding two items with one code holds that code
        once, so for codes shared by several items the user fraction is recounted exactly from
        ``dataset`` (one pass over its entries; ``progress``: a meter counts them); without a
        dataset it is capped at the sum, an upper bound.
        """
        item_codes = np.asarray(item_codes)
        if item_codes.ndim != 1 or item_codes.dtype.kind not in "uS":
            raise ValueError(f"item codes must be a 1-D code array, got {item_codes.dtype} "
                             f"{item_codes.shape}")
        codes, inverse = np.unique(item_codes, return_inverse=True)
        w = np.bincount(inverse, weights=weighted, minlength=codes.size)
        u = np.bincount(inverse, weights=unweighted, minlength=codes.size)
        shared = np.flatnonzero(np.bincount(inverse, minlength=codes.size) > 1)
        if shared.size and dataset is not None and dataset.num_users:
            u[shared] = _users_holding(dataset, inverse, shared, progress)
        return Truth(codes, w, np.minimum(u, 1.0))

    def lookup(self, codes: np.ndarray, which: str) -> np.ndarray:
        freq = self.weighted if which == "weighted" else self.unweighted
        codes = self.as_codes(codes)
        if self.codes.size == 0:
            return np.zeros(codes.shape)
        pos = np.minimum(np.searchsorted(self.codes, codes), self.codes.size - 1)
        return np.where(self.codes[pos] == codes, freq[pos], 0.0)

    def as_codes(self, codes: Sequence[int] | np.ndarray) -> np.ndarray:
        """Codes (an array or integers) in the dtype of this truth's codes."""
        return cw.like(codes, self.codes.dtype)

    def ranking(self, which: str) -> np.ndarray:
        """Frequencies of the true items in decreasing order (positive ones only)."""
        freq = self.weighted if which == "weighted" else self.unweighted
        ordered = np.sort(freq[freq > 0])[::-1]
        return ordered

    def top_codes(self, which: str, k: int) -> np.ndarray:
        """The codes of the k most frequent items (by decreasing frequency, ties by code),
        held by someone. Only the items at least as frequent as the k-th are sorted (a full
        sort of a million items, eight times per evaluation, took seconds)."""
        freq = self.weighted if which == "weighted" else self.unweighted
        candidates: np.ndarray = np.arange(freq.size)
        if 0 < k < freq.size:
            kth = np.partition(freq, freq.size - k)[freq.size - k]  # the k-th largest
            candidates = np.flatnonzero(freq >= kth)
        order = candidates[np.lexsort((self.codes[candidates], -freq[candidates]))][:k]
        return self.codes[order[freq[order] > 0]]


def evaluate(output_codes: Sequence[int] | np.ndarray, truth: Truth,
             top_k: Sequence[int] = TOP_K) -> dict[str, Any]:
    """All metrics of an output set (codes, duplicates ignored)."""
    codes = np.unique(truth.as_codes(output_codes))
    report: dict[str, Any] = {"discovered": int(codes.size)}
    for which in ("weighted", "unweighted"):
        freq = truth.lookup(codes, which)
        positives = int(np.count_nonzero(freq > 0))
        ranking = truth.ranking(which)
        best = float(ranking[: codes.size].sum())
        # (at most 1: the true top |H| hold the most mass; a sum in another order rounded over
        # it, and the utility loss showed as -0.0000)
        ratio = min(float(freq.sum()) / best, 1.0) if best > 0 else 0.0

        def recall(k: int, which: str = which) -> float:
            top = truth.top_codes(which, k)
            return float(np.isin(top, codes).sum() / top.size)

        report[which] = {
            "true_positives": positives,
            "false_positives": int(codes.size - positives),
            "false_positive_ratio": (codes.size - positives) / codes.size if codes.size else 0.0,
            "discovered_mass": float(freq.sum()),
            "weight_ratio": ratio,
            "utility_loss": 1.0 - ratio,
            "recall_at": ranked(top_k, ranking.size, recall),
        }
    # (the items some user holds, which cap every top-k: recall_at says which k it reached)
    report["held_items"] = int(truth.ranking("weighted").size)
    report["recall_at_null"] = unranked(top_k, report["held_items"])
    report["true_positives"] = report["weighted"]["true_positives"]
    report["false_positives"] = report["weighted"]["false_positives"]
    report["false_positive_ratio"] = report["weighted"]["false_positive_ratio"]
    return report


def whole_items(hitters_codes: np.ndarray, ended: np.ndarray, truth: Truth) -> dict[str, int]:
    """Of a run's heavy hitters (codes, and whether each ended): how many are whole items held
    by some user (their end symbol found), and how many were truncated at max_bits (each may
    stand for several items). The rows split three ways, what a user reads of their run: whole
    items held, truncated codes held (``truncated_held``) and false positives, held by no user
    (``found_false_positives``). A cut prefix is none of them: it is not among the heavy hitters
    (``cut_prefixes``, counted apart)."""
    ended = np.asarray(ended, dtype=bool)
    held = held_by_some_user(hitters_codes, truth)
    return {"whole_items_found": int(np.count_nonzero(held & ended)),
            "truncated_found": int(np.count_nonzero(~ended)),
            "truncated_held": int(np.count_nonzero(held & ~ended)),
            "found_false_positives": int(np.count_nonzero(~held))}


def held_by_some_user(hitters_codes: np.ndarray, truth: Truth) -> np.ndarray:
    """Whether each of the heavy hitters' codes is held by some user: those that are not are
    false positives, made by the noise (the paper's definition in Section "Server
    Algorithm")."""
    return truth.lookup(truth.as_codes(hitters_codes), "weighted") > 0


WHOLE_TOP_K = (50, 100, 1000)


def reached_ranks(top_k: Sequence[int], held: int) -> list[int]:
    """The k of ``top_k`` whose top is not the top of a smaller k again, over a ranking of
    ``held`` items: those up to ``held``, and the least above it, whose top is every item
    (over 10 items, recall at the top 100, 1,000 and 10,000 was the top 10's figure three
    times more, read as three more findings): ``[10]`` over 10 items, ``[10, 100]`` over 50,
    ``[10]`` over 4."""
    ranks = [k for k in top_k if k <= held]
    above = [k for k in top_k if k > held]
    if held > 0 and held not in ranks and above:
        ranks.append(min(above))
    return ranks


def ranked(top_k: Sequence[int], held: int,
           recall: Callable[[int], float]) -> dict[str, float | None]:
    """``recall(k)`` under the key ``str(k)`` for every k of ``top_k``, null (None) for a k
    past ``reached_ranks`` over ``held`` items, whose top is no other than a smaller k's
    (``unranked`` says so in words). Every k keeps its key: before, the keys stopped at the
    data's items, and a JSON reader of ``recall_at["1000"]`` over 10 items met a KeyError."""
    reached = set(reached_ranks(top_k, held))
    return {str(k): recall(k) if k in reached else None for k in top_k}


def unranked(top_k: Sequence[int], held: int) -> str | None:
    """Why ``ranked``'s recall is null at some k of ``top_k`` over ``held`` items, in words;
    None where it is null at none."""
    reached = reached_ranks(top_k, held)
    past = [f"{k:,}" for k in top_k if k not in reached]
    if not past:
        return None
    if not reached:
        return "no user holds an item: there is no top k"
    named = past[0] if len(past) == 1 else f"{', '.join(past[:-1])} or {past[-1]}"
    return (f"the users hold {held:,} item{'' if held == 1 else 's'}, every one in the top "
            f"{max(reached):,}: there is no top {named}")


def whole_recall(item_codes: np.ndarray, truth: Any, whole_codes: np.ndarray,
                 top_k: Sequence[int] = WHOLE_TOP_K) -> dict[str, float | None]:
    """Share of the k most frequent *items* (weighted distribution, ``GroundTruth``) found
    whole: their own code among ``whole_codes`` (ended heavy hitters), null past the items
    (``ranked``). Unlike ``recall_at``, which ranks codes, a code truncated at max_bits (it
    stands for several items) finds none of them (issue 27)."""
    found = np.asarray(whole_codes)

    def recall(k: int) -> float:
        return float(np.mean(np.isin(np.asarray(item_codes)[truth.top(k)], found)))

    return ranked(top_k, int(np.count_nonzero(truth.weighted > 0)), recall)


def marginal_curve(output_codes: Sequence[int] | np.ndarray, truth: Truth, which: str,
                   window: int = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Sliding-window sums of true frequency over H (by true frequency) and over the true top.

    Entry i (0-based) sums positions max(0, i - window) .. i, the paper's (x_{i-W}, ..., x_i).
    """
    freq = np.sort(truth.lookup(np.unique(truth.as_codes(output_codes)), which))[::-1]
    top = truth.ranking(which)[: max(freq.size, 1)]
    return _window_sums(freq, window), _window_sums(top, window)


def _window_sums(values: np.ndarray, window: int) -> np.ndarray:
    cum = np.concatenate(([0.0], np.cumsum(values)))
    idx = np.arange(values.size)
    return cum[idx + 1] - cum[np.maximum(idx - window, 0)]


def _users_holding(dataset: FederatedDataset, item_code: np.ndarray, codes: np.ndarray,
                   progress: bool = False) -> np.ndarray:
    """Fraction of users holding each of ``codes`` (indices into the code table).

    One pass over the entries in chunks, visiting only the entries of items with those codes;
    each chunk's pages are released (a memory-mapped dataset would otherwise stay resident, the
    whole of it by the end of the pass). ``progress``: a meter counts the entries.
    """
    wanted = np.zeros(int(item_code.max()) + 1, dtype=bool)
    wanted[codes] = True
    item_wanted = wanted[item_code]
    holders = np.zeros(wanted.size, dtype=np.int64)
    with Meter(progress, f"ground truth of {dataset.name}'s codes", dataset.num_entries,
               " entries", unit_scale=True) as meter:
        for lo, hi in user_chunks(dataset.indptr, 1 << 24):
            a, b = int(dataset.indptr[lo]), int(dataset.indptr[hi])
            items = np.asarray(dataset.items[a:b])
            hit = np.flatnonzero(item_wanted[items])
            if hit.size:
                user = np.searchsorted(dataset.indptr[lo : hi + 1], hit + a, side="right") - 1
                pairs = np.unique(user.astype(np.int64) * wanted.size + item_code[items[hit]])
                holders += np.bincount(pairs % wanted.size, minlength=wanted.size)
            release_pages(dataset.items)
            meter.update(b - a)
    return holders[codes] / dataset.num_users
