"""Build a dataset directory shard by shard, so large inputs never sit in memory at once.

A loader hands users to `ShardedBuilder` one at a time (as ``{item: count}``). Every
``shard_entries`` (user, item) pairs the builder sorts the shard's own vocabulary, writes the
shard's CSR arrays to a scratch directory and forgets it. `ShardedBuilder.finish` merges the shards'
sorted vocabularies into one sorted vocabulary (each shard's id map is then monotone, so items
stay ascending within a user) and streams the arrays into the final directory, which appears
atomically. Peak memory is one shard plus the merged vocabulary.

Generators that already use global item ids (the synthetic population) write shards of the same
layout without ``vocab.txt`` and call `assemble_shards` with the vocabulary; unused items are
dropped there (the id map is again monotone).

Shard layout: ``lengths.npy`` (int64, distinct items per user), ``items.npy`` (int32),
``counts.npy`` (uint16 or uint32) and, for local ids, ``vocab.txt`` (sorted, one item per line).
"""

from __future__ import annotations

import heapq
import logging
import os
import shutil
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from fedhh.data.dataset import (
    atomic_directory,
    check_item,
    format_version,
    make_meta,
    write_meta,
    write_vocabulary,
)
from fedhh.data.progress import Meter
from fedhh.data.scratch import scratch_path
from fedhh.errors import DatasetError

logger = logging.getLogger(__name__)

DEFAULT_SHARD_ENTRIES = 1 << 22
_COPY_ENTRIES = 1 << 24


class ShardedBuilder:
    """Accumulate users as ``{item: count}`` and build a dataset directory shard by shard.

    Use as a context manager (the scratch directory is removed on exit)::

        with ShardedBuilder(target.parent) as builder:
            for counts in users:
                builder.add_user(counts)
            builder.finish(target, name="mine", provenance="...")
    """

    def __init__(self, scratch_parent: Path, shard_entries: int = DEFAULT_SHARD_ENTRIES) -> None:
        if shard_entries < 1:
            raise ValueError(f"shard_entries must be >= 1, got {shard_entries}")
        scratch_parent.mkdir(parents=True, exist_ok=True)
        # Made by the first shard, inside the with block that removes it (`fedhh.data.scratch`;
        # before, mkdtemp made it here, and a Ctrl-C before the with block began left it).
        self._scratch = scratch_path(scratch_parent, ".build-")
        self._shard_entries = shard_entries
        self._shards: list[Path] = []
        self._index: dict[str, int] = {}
        self._items = array("i")
        self._counts = array("q")
        self._lengths = array("q")
        self.num_users = 0
        self.num_tokens = 0

    def __enter__(self) -> ShardedBuilder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)

    def add_user(self, counts: Mapping[str, int]) -> None:
        """Add one user holding ``counts[item]`` copies of each item (an empty map is allowed)."""
        index = self._index
        for item, count in counts.items():
            if count < 1:
                raise DatasetError(f"item {item!r} has count {count}; counts must be >= 1")
            local = index.get(item)
            if local is None:
                check_item(item)
                local = index[item] = len(index)
            self._items.append(local)
            self._counts.append(count)
            self.num_tokens += count
        self._lengths.append(len(counts))
        self.num_users += 1
        if len(self._items) >= self._shard_entries:
            self._flush()

    def _flush(self) -> None:
        if not self._lengths:
            return
        words = list(self._index)
        order = sorted(range(len(words)), key=words.__getitem__)
        rank = np.empty(len(words), dtype=np.int64)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(words), dtype=np.int64)
        lengths = np.frombuffer(self._lengths, dtype=np.int64).copy()
        items = rank[np.frombuffer(self._items, dtype=np.int32)] if self._items else rank[:0]
        counts = np.frombuffer(self._counts, dtype=np.int64)
        owner = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
        perm = np.argsort(owner * max(len(words), 1) + items, kind="stable")
        self._scratch.mkdir(mode=0o700, exist_ok=True)
        shard = self._scratch / f"shard-{len(self._shards):06d}"
        shard.mkdir()
        write_vocabulary(shard / "vocab.txt", (words[i] for i in order))
        np.save(shard / "lengths.npy", lengths)
        np.save(shard / "items.npy", items[perm].astype(np.int32))
        np.save(shard / "counts.npy", narrow_counts(counts[perm]))
        self._shards.append(shard)
        logger.debug("wrote %s: %d users, %d entries", shard.name, lengths.size, items.size)
        self._index = {}
        self._items = array("i")
        self._counts = array("q")
        self._lengths = array("q")

    def finish(
        self,
        target: Path,
        *,
        name: str,
        provenance: str,
        stats: dict[str, Any] | None = None,
        progress: bool = False,
        require_items: bool = False,
    ) -> Path:
        """Merge the shards into the dataset directory ``target`` (atomically replaced). With
        ``require_items``, a dataset in which no user holds an item is refused (DatasetError),
        ``target`` untouched: an import of nothing to discover (issue 28: an empty file was
        imported as 0 users)."""
        if require_items and self.num_tokens == 0:
            raise DatasetError(f"{name} ({provenance}): none of its {self.num_users} users "
                               "holds an item (an empty file, or only blank lines): nothing to "
                               "import")
        self._flush()
        vocabulary = merge_sorted_vocabularies(self._shards)
        index = {item: i for i, item in enumerate(vocabulary)}
        maps = [
            np.fromiter((index[w] for w in read_lines(s / "vocab.txt")), dtype=np.int64)
            for s in self._shards
        ]
        del index
        full_stats = {"tokens": self.num_tokens, **(stats or {})}
        with Meter(progress, f"{name}: writing", assembly_steps(len(self._shards), False),
                   "step") as meter:
            return assemble_shards(
                target, self._shards, vocabulary, id_maps=maps, name=name,
                provenance=provenance, stats=full_stats, num_users=self.num_users, meter=meter,
            )


def build_dataset(users: Iterable[Mapping[str, int]], target: str | os.PathLike[str], *,
                  name: str, provenance: str, stats: dict[str, Any],
                  shard_entries: int = DEFAULT_SHARD_ENTRIES, progress: bool = False,
                  require_items: bool = False) -> Path:
    """Stream users' item counts into a dataset directory at ``target`` (atomically); with
    ``progress``, a meter (`fedhh.data.progress`) counts the shards written (the reader of
    ``users`` meters the reading); ``require_items``: refuse a dataset without any item."""
    with ShardedBuilder(Path(target).parent, shard_entries) as builder:
        for counts in users:
            builder.add_user(counts)
        return builder.finish(Path(target), name=name, provenance=provenance, stats=stats,
                              progress=progress, require_items=require_items)


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file written by `write_vocabulary` (its byte-order mark, written
    before a first item that begins with U+FEFF, dropped)."""
    text = path.read_text(encoding="utf-8-sig")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def merge_sorted_vocabularies(shards: Sequence[Path]) -> list[str]:
    """The sorted union of the shards' sorted vocabularies."""
    merged: list[str] = []
    for item in heapq.merge(*(iter(read_lines(s / "vocab.txt")) for s in shards)):
        if not merged or merged[-1] != item:
            merged.append(item)
    return merged


def narrow_counts(counts: np.ndarray) -> np.ndarray:
    """Counts as uint16 when they all fit, else uint32 (DatasetError beyond 2^32 - 1)."""
    top = int(counts.max()) if counts.size else 0
    if top > np.iinfo(np.uint32).max:
        raise DatasetError(f"an item count of {top} exceeds 2^32 - 1")
    return counts.astype(np.uint16 if top <= 0xFFFF else np.uint32)


def _shard_arrays(shard: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.load(shard / "lengths.npy", allow_pickle=False)
    items = np.load(shard / "items.npy", allow_pickle=False)
    counts = np.load(shard / "counts.npy", allow_pickle=False)
    return lengths, items, counts


class _NpyWriter:
    """Append-only writer of a 1-D .npy file of known length (plain writes, no memory map, so
    writing a multi-GB array does not grow the process's resident memory)."""

    def __init__(self, path: Path, dtype: type, length: int) -> None:
        self._dtype = np.dtype(dtype)
        self._left = length
        self._path = path
        self._handle = open(path, "wb")  # noqa: SIM115 - closed in __exit__
        header = {"descr": np.lib.format.dtype_to_descr(self._dtype), "fortran_order": False,
                  "shape": (length,)}
        np.lib.format.write_array_header_1_0(self._handle, header)

    def write(self, values: np.ndarray) -> None:
        if values.size > self._left:
            raise DatasetError(f"{self._path}: more values than the declared length")
        self._handle.write(np.ascontiguousarray(values, dtype=self._dtype).tobytes())
        self._left -= int(values.size)

    def __enter__(self) -> _NpyWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._handle.close()
        if exc_type is None and self._left:
            raise DatasetError(f"{self._path}: {self._left} values short of the declared length")


def _chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, size):
        yield lo, min(n, lo + size)


def assembly_steps(shards: int, drop_unused: bool) -> int:
    """How far `assemble_shards` advances its meter: one step per shard and pass over them."""
    return shards * (2 if drop_unused else 1)


def assemble_shards(
    target: Path,
    shards: Sequence[Path],
    vocabulary: Sequence[str],
    *,
    id_maps: Sequence[np.ndarray] | None = None,
    name: str,
    provenance: str,
    stats: dict[str, Any] | None = None,
    num_users: int | None = None,
    drop_unused: bool = False,
    meter: Meter | None = None,
) -> Path:
    """Concatenate shards into the dataset directory ``target``.

    ``id_maps[k]`` maps shard k's item ids to ``vocabulary`` ids (monotone); without id maps the
    shards already use ``vocabulary`` ids. With ``drop_unused`` items no user holds are removed
    from the vocabulary. ``meter``, if given, advances by `assembly_steps` (once per shard and
    pass).
    """
    counts_top = 0
    total_users = 0
    total_entries = 0
    used = np.zeros(len(vocabulary), dtype=bool) if drop_unused else None
    for k, shard in enumerate(shards):
        lengths, items, counts = _shard_arrays(shard)
        total_users += int(lengths.shape[0])
        total_entries += int(items.shape[0])
        if counts.size:
            counts_top = max(counts_top, int(counts.max()))
        if used is not None:
            ids = items if id_maps is None else id_maps[k][items]
            for lo, hi in _chunks(int(ids.shape[0]), _COPY_ENTRIES):
                used[np.asarray(ids[lo:hi])] = True
            if meter is not None:
                meter.update()
    if num_users is not None and num_users != total_users:
        raise DatasetError(f"shards hold {total_users} users, expected {num_users}")
    if used is not None:
        keep = np.flatnonzero(used)
        compact = np.full(len(vocabulary), -1, dtype=np.int64)
        compact[keep] = np.arange(keep.size, dtype=np.int64)
        final_vocab: Sequence[str] = [vocabulary[i] for i in keep.tolist()]
    else:
        compact = None
        final_vocab = vocabulary
    counts_dtype = np.uint16 if counts_top <= 0xFFFF else np.uint32
    with atomic_directory(target) as tmp:
        write_vocabulary(tmp / "vocab.txt", final_vocab)
        indptr = np.zeros(total_users + 1, dtype=np.int64)
        user_pos = 0
        entry_pos = 0
        with _NpyWriter(tmp / "items.npy", np.int32, total_entries) as out_items, \
                _NpyWriter(tmp / "counts.npy", counts_dtype, total_entries) as out_counts:
            for k, shard in enumerate(shards):
                lengths, items, counts = _shard_arrays(shard)
                n = int(lengths.shape[0])
                indptr[user_pos + 1 : user_pos + n + 1] = entry_pos + np.cumsum(lengths)
                for lo, hi in _chunks(int(items.shape[0]), _COPY_ENTRIES):
                    ids = np.asarray(items[lo:hi], dtype=np.int64)
                    if id_maps is not None:
                        ids = id_maps[k][ids]
                    if compact is not None:
                        ids = compact[ids]
                    out_items.write(ids)
                    out_counts.write(np.asarray(counts[lo:hi]))
                user_pos += n
                entry_pos += int(items.shape[0])
                if meter is not None:
                    meter.update()
        np.save(tmp / "indptr.npy", indptr)
        meta = make_meta(
            name=name, provenance=provenance, num_users=total_users, num_entries=total_entries,
            vocabulary_size=len(final_vocab), stats=stats, version=format_version(final_vocab),
        )
        write_meta(tmp, meta)
    logger.info("wrote %s: %d users, %d entries, %d items", target, total_users, total_entries,
                len(final_vocab))
    return target
