"""A simulated population: a dataset with its items encoded, and each round's selections.

Multi-data-point mode: each round every device selects one of its items by the selection rule.
Single-data-point mode (paper, Section "Experiments"): each device draws one item once from its
empirical distribution and keeps it for every round.
"""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedhh.codec import Codec
from fedhh.data.dataset import (
    FederatedDataset,
    atomic_file,
    read_cache,
    release_pages,
    user_chunks,
)
from fedhh.data.progress import Meter
from fedhh.data.truth import dataset_contents
from fedhh.device import (
    NOTHING,
    Eligibility,
    Selection,
    SelectionRule,
    select_block,
    select_many,
    streams,
)
from fedhh.server import RoundQuery

log = logging.getLogger(__name__)

CHUNK_ENTRIES = 1 << 23
SAMPLED_CHUNK_ENTRIES = 1 << 20
ENCODE_ITEMS = 1 << 17
MAX_KEPT_DRAWS = 8
WORKERS = min(2, os.cpu_count() or 1)


@dataclass
class Population:
    """A dataset with its vocabulary encoded; in single-item mode, each user's fixed item.

    One ``Population`` can serve many runs (``simulate(..., population=)``): encoding the
    vocabulary and drawing single items cost seconds at 1.6M users, and both depend only on the
    dataset, the codec and (for the items) the seed, so ``with_single_items`` keeps its draws.
    """

    dataset: FederatedDataset
    codec: Codec
    item_codes: np.ndarray                 # code per vocabulary item (fedhh.codec.codes)
    single_items: np.ndarray | None = None  # per user: the one item id (or -1), single mode
    _drawn: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @staticmethod
    def build(dataset: FederatedDataset, codec: Codec, progress: bool = False) -> Population:
        """Encode the vocabulary (in blocks of `ENCODE_ITEMS`; ``progress``: a meter counts
        them). A token codebook's codes are kept next to the dataset (``_CodesCache``): its
        encoder finds each item's shortest writing in Python, seconds per million items."""
        cache = _CodesCache(dataset, codec) if codec.book.tokens else None
        codes = cache.load() if cache is not None else None
        if codes is None:
            vocabulary = dataset.vocabulary
            parts = [codec.encode_many([]).codes]
            with Meter(progress, f"encoding {dataset.name}'s items", len(vocabulary), " items",
                       unit_scale=True) as meter:
                for lo in range(0, len(vocabulary), ENCODE_ITEMS):
                    block = list(vocabulary[lo : lo + ENCODE_ITEMS])
                    parts.append(codec.encode_many(block).codes)
                    meter.update(len(block))
            codes = np.concatenate(parts)
            if cache is not None:
                cache.store(codes)
        codes.flags.writeable = False
        return Population(dataset, codec, codes)

    @property
    def num_users(self) -> int:
        return self.dataset.num_users

    def with_single_items(self, seed: int) -> Population:
        """Single-data-point mode: each user draws one item from its empirical distribution,
        once, from ``streams.single_item_stream(seed)``; the draw is kept for the next run."""
        items = self._drawn.get(seed)
        if items is None:
            items = self._draw_single_items(streams.single_item_stream(seed))
            items.flags.writeable = False
            if len(self._drawn) >= MAX_KEPT_DRAWS:
                self._drawn.pop(next(iter(self._drawn)))
            self._drawn[seed] = items
        return Population(self.dataset, self.codec, self.item_codes, items)

    def _draw_single_items(self, rng: np.random.Generator) -> np.ndarray:
        picks = np.full(self.num_users, NOTHING, dtype=np.int64)
        weighted = Selection(SelectionRule.WEIGHTED, prefix_conditioning=True)
        everything = Eligibility.everything(self.item_codes.size)
        ds = self.dataset
        for lo, hi in user_chunks(ds.indptr, CHUNK_ENTRIES):
            base = int(ds.indptr[lo])
            end = int(ds.indptr[hi])
            chosen = select_block(
                ds.indptr[lo : hi + 1] - base, ds.items[base:end], ds.counts[base:end],
                everything, weighted, rng,
            )
            ok = chosen >= 0
            picks[lo:hi][ok] = ds.items[base:end][chosen[ok]]
            release_pages(ds.items, ds.counts)
        return picks

    def selected_domain_indices(
        self,
        query: RoundQuery,
        selection: Selection,
        seeds: np.random.SeedSequence,
        participants: np.ndarray | None = None,
    ) -> np.ndarray:
        """Each participating user's domain element (-1: nothing to report), in user order.

        Users are processed in blocks of about CHUNK_ENTRIES entries on a small thread pool
        (numpy releases the GIL in the heavy steps); block i draws from ``seeds.spawn``'s child
        i, so the result does not depend on the number of threads.
        """
        eligibility = Eligibility.of(self.item_codes, query.round_filter())
        if self.single_items is not None:
            items = self.single_items if participants is None else self.single_items[participants]
        else:
            items = self._select(eligibility, selection, seeds, participants, 1)[:, 0]
        return self._domain_of(query, eligibility, items)

    def selected_domain_sets(
        self,
        query: RoundQuery,
        selection: Selection,
        seeds: np.random.SeedSequence,
        k: int,
        participants: np.ndarray | None = None,
    ) -> np.ndarray:
        """Each participating user's up to ``k`` distinct domain elements, shape (users, k),
        -1 filling the rest: ``select_many``'s items, an element drawn twice (two items with
        one prefix) kept once, since a multi-item report sets one bit per element. With k = 1
        the column of ``selected_domain_indices`` (the same draws)."""
        eligibility = Eligibility.of(self.item_codes, query.round_filter())
        items = self._select(eligibility, selection, seeds, participants, k)
        domain = self._domain_of(query, eligibility, items.ravel()).reshape(items.shape)
        ordered = np.sort(domain, axis=1)
        repeated = np.zeros(ordered.shape, dtype=bool)
        repeated[:, 1:] = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
        return np.where(repeated, -1, ordered)

    def _domain_of(self, query: RoundQuery, eligibility: Eligibility,
                   items: np.ndarray) -> np.ndarray:
        # Only users holding a selected item are looked up: when none does, the vocabulary
        # may be empty and there is nothing to index.
        held = np.flatnonzero(items >= 0)
        domain = np.full(items.size, -1, dtype=np.int64)
        if held.size:
            # Each item on the list indexed once, then looked up per user: a code is several
            # words wide (completion rounds widen them), an index one, and the users outnumber
            # the items on the list (all of them in the first round, fewer after).
            on_list = np.flatnonzero(eligibility.prefix_index >= 0)
            of_item = np.full(eligibility.prefix_index.size, -1, dtype=np.int64)
            of_item[on_list] = query.domain_index(self.item_codes[on_list],
                                                  eligibility.prefix_index[on_list])
            domain[held] = of_item[items[held]]
        return domain

    def _select(
        self,
        eligibility: Eligibility,
        selection: Selection,
        seeds: np.random.SeedSequence,
        users: np.ndarray | None,
        k: int,
    ) -> np.ndarray:
        """The selected item ids of every user (or of ``users``), shape (users, k), NOTHING
        when none (``select_many``; its first column is ``select_block``'s draw)."""
        ds = self.dataset
        indptr = ds.indptr
        lengths = np.diff(indptr) if users is None else indptr[users + 1] - indptr[users]
        # A sample of users is gathered from all over the memory-mapped entries, and each read
        # maps the pages around it too (the kernel's fault-around): smaller blocks, each
        # followed by release_pages, keep that bounded (a 2% sample of the default dataset
        # mapped 1.5 GB of it in 8M-entry blocks).
        chunk = CHUNK_ENTRIES if users is None else SAMPLED_CHUNK_ENTRIES
        bounds = user_chunks(np.concatenate(([0], np.cumsum(lengths))), chunk)
        picked = np.full((lengths.size, k), NOTHING, dtype=np.int64)
        children = seeds.spawn(len(bounds))

        def work(block: int) -> None:
            lo, hi = bounds[block]
            if users is None:
                base, end = int(ds.indptr[lo]), int(ds.indptr[hi])
                rows: slice | np.ndarray = slice(base, end)
                sub_indptr = ds.indptr[lo : hi + 1] - base
            else:
                starts = ds.indptr[users[lo:hi]]
                rows = _gather_rows(starts, lengths[lo:hi])
                sub_indptr = np.concatenate(([0], np.cumsum(lengths[lo:hi])))
            block_items = np.asarray(ds.items[rows])
            chosen = select_many(
                sub_indptr, block_items, np.asarray(ds.counts[rows]), eligibility, selection,
                np.random.default_rng(children[block]), k,
            )
            ok = chosen >= 0
            result = np.full(chosen.shape, NOTHING, dtype=np.int64)
            result[ok] = block_items[chosen[ok]]
            picked[lo:hi] = result
            release_pages(ds.items, ds.counts)

        if len(bounds) <= 1 or WORKERS <= 1:
            for block in range(len(bounds)):
                work(block)
        else:
            pool = ThreadPoolExecutor(WORKERS)
            try:
                list(pool.map(work, range(len(bounds))))
            finally:  # on Ctrl-C, only the blocks under way finish: the rest are dropped
                pool.shutdown(cancel_futures=True)
        return picked


class _CodesCache:
    """A dataset's vocabulary codes for one codec, in ``<dataset>/item_codes_v2_<key>.npz``
    beside the SHA-256 of the dataset's contents they were encoded from
    (``fedhh.data.truth.dataset_contents``): a file of other contents, length or width is
    ignored and rewritten (before, v1 files were kept by the vocabulary's size alone, and a
    dataset whose items were edited in place to the same count was given its former items'
    codes); a read-only directory is simply not written."""

    def __init__(self, dataset: FederatedDataset, codec: Codec) -> None:
        self.dataset = dataset
        self.path = None if dataset.root is None else \
            Path(dataset.root) / f"item_codes_v2_{codec.key}.npz"
        # (the former file of this codec, kept by the vocabulary's size alone: never read now)
        self.former = None if dataset.root is None else \
            Path(dataset.root) / f"item_codes_v1_{codec.key}.npy"
        self.size = len(dataset.vocabulary)
        self.dtype = codec.encode_many([]).codes.dtype

    def load(self) -> np.ndarray | None:
        if self.path is None or not self.path.is_file():
            return None
        arrays = read_cache(self.path, ("codes", "contents"))
        if arrays is None:
            return None
        codes, contents = arrays["codes"], str(arrays["contents"])
        if contents != dataset_contents(self.dataset):
            return None
        return codes if codes.shape == (self.size,) and codes.dtype == self.dtype else None

    def store(self, codes: np.ndarray) -> None:
        if self.path is None:
            return
        try:
            with atomic_file(self.path) as out:
                np.savez(out, codes=codes, contents=np.array(dataset_contents(self.dataset)))
        except OSError as error:
            log.info("not caching item codes at %s: %s", self.path, error)
            return
        if self.former is not None:
            with contextlib.suppress(OSError):
                self.former.unlink(missing_ok=True)


def _gather_rows(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated entry positions of the given rows."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(total, dtype=np.int64) + offsets

