"""The federated dataset type and its on-disk format.

A dataset is a set of users, each holding a multiset of items (words). It is stored in CSR form:
user ``u`` holds items ``items[indptr[u]:indptr[u+1]]`` (distinct ids, ascending) with
multiplicities ``counts[indptr[u]:indptr[u+1]]`` (all >= 1). Item ids index ``vocabulary``.

On-disk format (a directory, version 1 or 2)::

    meta.json     {"format": "fedhh-dataset", "version": 1 or 2, "num_users", "num_entries",
                   "vocabulary_size", "name", "provenance", "stats"}
    vocab.txt     one item per line, UTF-8, '\\n' line ends, line i is item id i (items are
                  distinct and non-empty; in version 1 they hold no whitespace, in version 2 no
                  line break: see `item_defect`)
    indptr.npy    int64[num_users + 1], indptr[0] == 0, non-decreasing, indptr[-1] == num_entries
    items.npy     int32[num_entries], each in [0, vocabulary_size), ascending within a user
    counts.npy    uint16 or uint32[num_entries], each >= 1

An item (`item_defect`) is any non-empty string of Unicode characters (no lone surrogate) that
holds no line break (``\\n``, ``\\r``, ``\\v``, ``\\f``, U+001C..U+001E, U+0085, U+2028,
U+2029: whatever `str.splitlines` splits at), so phrases (``new york``) and queries are items. A
line of vocab.txt is the item exactly, spaces at either end included: it is split at ``\\n`` only
and nothing is trimmed. A dataset whose items hold no whitespace is written as version 1, as
before, so older fedhh reads it; one with an item holding whitespace is version 2, which older
fedhh refuses by its version (not by misreading an item). Version 1 is read exactly as before:
an item holding whitespace there is a defect.

The arrays are loaded memory-mapped, so a 1.6M-user dataset costs no more RAM than the pages
the simulator touches. Loading validates structure and ranges and raises DatasetError naming the
file and the defect; nothing is ever partially written (files go to a temporary directory that is
renamed into place).
"""

from __future__ import annotations

import codecs
import itertools
import json
import logging
import math
import mmap
import os
import re
import secrets
import shutil
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from fedhh.data.progress import Meter
from fedhh.data.scratch import scratch_path, signals_held
from fedhh.errors import DatasetError
from fedhh.input_files import not_utf8, wide_encoding_problem

log = logging.getLogger(__name__)

FORMAT = "fedhh-dataset"
VERSION = 2  # the newest version written and read (`VERSIONS`)
VERSIONS = (1, 2)
# What str.splitlines splits at: none may be inside an item (one item per line of vocab.txt).
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_BREAK = re.compile(f"[{LINE_BREAKS}]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_WHITESPACE = re.compile(r"\s")  # (str.isspace's characters)
_CHUNK = 1 << 24


@dataclass(frozen=True, eq=False)
class FederatedDataset:
    """Users' item counts in CSR form; see the module docstring for the invariants."""

    vocabulary: tuple[str, ...]
    indptr: np.ndarray
    items: np.ndarray
    counts: np.ndarray
    name: str = "unnamed"
    provenance: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    root: Path | None = None  # the directory it was loaded from, if any (ground-truth cache)

    @property
    def num_users(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_entries(self) -> int:
        return int(self.items.shape[0])

    def user_items(self, user: int) -> tuple[np.ndarray, np.ndarray]:
        """The (item ids, counts) of one user."""
        lo, hi = int(self.indptr[user]), int(self.indptr[user + 1])
        return self.items[lo:hi], self.counts[lo:hi]

    def distinct_per_user(self) -> np.ndarray:
        return np.diff(self.indptr)

    def tokens_per_user(self, progress: bool = False) -> np.ndarray:
        """Total item count of every user (int64), computed chunk by chunk (``progress``: a
        meter counts the entries)."""
        with Meter(progress, f"counting {self.name}'s words", self.num_entries, " entries",
                   unit_scale=True) as meter:
            return self._tokens_per_user(meter)

    def _tokens_per_user(self, meter: Meter) -> np.ndarray:
        totals = np.zeros(self.num_users, dtype=np.int64)
        for lo, hi in user_chunks(self.indptr, _CHUNK):
            seg = self.counts[self.indptr[lo] : self.indptr[hi]].astype(np.int64)
            starts = self.indptr[lo:hi] - self.indptr[lo]
            nonempty = np.diff(self.indptr[lo : hi + 1]) > 0
            sums = np.zeros(hi - lo, dtype=np.int64)
            if seg.size:
                sums[nonempty] = np.add.reduceat(seg, starts[nonempty])
            totals[lo:hi] = sums
            release_pages(self.counts)
            meter.update(int(self.indptr[hi] - self.indptr[lo]))
        return totals

    def summary(self, progress: bool = False) -> dict[str, Any]:
        """Population statistics: users, entries, mean words and distinct words per user
        (``progress``: `tokens_per_user`)."""
        tokens = self.tokens_per_user(progress)
        distinct = self.distinct_per_user()
        return {
            "name": self.name,
            "users": self.num_users,
            "vocabulary": len(self.vocabulary),
            "entries": self.num_entries,
            "tokens": int(tokens.sum()),
            "mean_words_per_user": float(tokens.mean()) if self.num_users else 0.0,
            "mean_distinct_words_per_user": float(distinct.mean()) if self.num_users else 0.0,
            "users_without_items": int(np.count_nonzero(distinct == 0)),
        }


def release_pages(*arrays: np.ndarray) -> None:
    """Drop memory-mapped arrays' pages from this process's resident set (MADV_DONTNEED).

    The pages stay in the OS page cache and are read back on the next access, so this only
    lowers the reported resident memory after a full pass (validation, statistics). Arrays
    that are not memory-mapped are left alone.
    """
    for array in arrays:
        handle = getattr(array, "_mmap", None)
        if isinstance(handle, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            try:
                handle.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):  # pragma: no cover - platform without madvise
                return


def user_chunks(indptr: np.ndarray, max_entries: int) -> list[tuple[int, int]]:
    """Split users into consecutive ranges [lo, hi) of at most about max_entries entries each."""
    num_users = indptr.shape[0] - 1
    if num_users == 0:
        return []
    bounds = [0]
    while bounds[-1] < num_users:
        lo = bounds[-1]
        target = indptr[lo] + max_entries
        hi = int(np.searchsorted(indptr, target, side="right")) - 1
        bounds.append(min(max(hi, lo + 1), num_users))
    return list(itertools.pairwise(bounds))


def from_user_counts(
    users: list[dict[str, int]], name: str = "unnamed", provenance: str = ""
) -> FederatedDataset:
    """Build a dataset from per-user {item: count} dicts (small data, tests and loaders)."""
    index: dict[str, int] = {}
    for user in users:
        for item, count in user.items():
            if count < 1:
                raise DatasetError(f"item {item!r} has count {count}; counts must be >= 1")
            check_item(item)
            index.setdefault(item, len(index))
    vocabulary = tuple(sorted(index))
    ids = {item: i for i, item in enumerate(vocabulary)}
    indptr = np.zeros(len(users) + 1, dtype=np.int64)
    rows_items: list[np.ndarray] = []
    rows_counts: list[np.ndarray] = []
    for u, user in enumerate(users):
        pairs = sorted((ids[item], count) for item, count in user.items())
        rows_items.append(np.array([p[0] for p in pairs], dtype=np.int32))
        rows_counts.append(np.array([p[1] for p in pairs], dtype=np.int64))
        indptr[u + 1] = indptr[u] + len(pairs)
    items = np.concatenate(rows_items) if rows_items else np.zeros(0, np.int32)
    counts64 = np.concatenate(rows_counts) if rows_counts else np.zeros(0, np.int64)
    return FederatedDataset(
        vocabulary, indptr, items.astype(np.int32), _narrow_counts(counts64), name, provenance
    )


def _narrow_counts(counts: np.ndarray) -> np.ndarray:
    if counts.size and int(counts.max()) > np.iinfo(np.uint32).max:
        raise DatasetError("an item count exceeds 2^32 - 1")
    dtype = np.uint16 if not counts.size or int(counts.max()) <= 0xFFFF else np.uint32
    return counts.astype(dtype)


def item_defect(item: object) -> str | None:
    """Why ``item`` is not an item (module docstring), or None if it is one."""
    if not isinstance(item, str):
        return f"is a {type(item).__name__}, not a string"
    if not item:
        return "is empty"
    if broken := _LINE_BREAK.search(item):
        return f"holds a line break ({_escaped_char(broken[0])}); an item is one line"
    if lone := _SURROGATE.search(item):
        return (f"holds a lone surrogate ({_escaped_char(lone[0])}), which is not a Unicode "
                "character (UTF-8 cannot encode it)")
    return None


def _escaped_char(char: str) -> str:
    return ascii(char)[1:-1]  # (\\n, \\x85, \\u2028, \\ud800)


def check_item(item: str) -> None:
    """Raise DatasetError unless ``item`` is an item (`item_defect`)."""
    if (defect := item_defect(item)) is not None:
        raise DatasetError(f"item {item!r} {defect}")


def format_version(vocabulary: Iterable[str]) -> int:
    """The format version a dataset of ``vocabulary`` is written as: 1 if no item holds
    whitespace (what fedhh wrote before items could), else 2."""
    return 2 if any(_WHITESPACE.search(item) for item in vocabulary) else 1


def save_dataset(dataset: FederatedDataset, path: str | os.PathLike[str]) -> Path:
    """Write the dataset atomically: a temporary sibling directory renamed into place.

    The arrays are checked first (the same checks as loading), so an invalid dataset is never
    written; counts are stored as uint16 when they fit, else uint32.
    """
    indptr = np.asarray(dataset.indptr, dtype=np.int64)
    items = np.asarray(dataset.items)
    if items.size and (items.dtype.kind not in "iu" or int(items.max()) > np.iinfo(np.int32).max):
        raise DatasetError(f"item ids must be integers below 2^31, got dtype {items.dtype}")
    counts = np.asarray(dataset.counts)
    if counts.dtype.kind not in "iu":
        raise DatasetError(f"counts must be integers, got dtype {counts.dtype}")
    counts = _narrow_counts(counts.astype(np.int64)) if counts.dtype not in (
        np.dtype(np.uint16), np.dtype(np.uint32)) else counts
    checked = FederatedDataset(
        tuple(dataset.vocabulary), indptr, items.astype(np.int32, copy=False), counts,
        dataset.name, dataset.provenance, dict(dataset.stats),
    )
    where = Path(path)
    _check_structure(where, _meta_of(checked), checked)
    _check_vocabulary(where, checked.vocabulary, format_version(checked.vocabulary))
    _check_contents(where, checked)
    with atomic_directory(where) as tmp:
        write_vocabulary(tmp / "vocab.txt", checked.vocabulary)
        np.save(tmp / "indptr.npy", checked.indptr)
        np.save(tmp / "items.npy", checked.items)
        np.save(tmp / "counts.npy", checked.counts)
        write_meta(tmp, _meta_of(checked))
    return where


def _meta_of(dataset: FederatedDataset) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": format_version(dataset.vocabulary),
        "name": dataset.name,
        "provenance": dataset.provenance,
        "num_users": dataset.num_users,
        "num_entries": dataset.num_entries,
        "vocabulary_size": len(dataset.vocabulary),
        "stats": dataset.stats,
    }


def make_meta(
    *, name: str, provenance: str, num_users: int, num_entries: int, vocabulary_size: int,
    stats: dict[str, Any] | None = None, version: int = 1,
) -> dict[str, Any]:
    """The meta.json content of a dataset written piecewise (streaming builders); ``version``:
    `format_version` of its vocabulary."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version}")
    return {
        "format": FORMAT,
        "version": version,
        "name": name,
        "provenance": provenance,
        "num_users": int(num_users),
        "num_entries": int(num_entries),
        "vocabulary_size": int(vocabulary_size),
        "stats": dict(stats or {}),
    }


def write_meta(root: Path, meta: dict[str, Any]) -> None:
    """Write meta.json (written last by every writer: its presence marks a complete directory)."""
    (root / "meta.json").write_text(
        json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )


def write_vocabulary(path: Path, vocabulary: Iterable[str]) -> None:
    """Write vocab.txt: one item per line, UTF-8, '\\n' line ends; a byte-order mark first
    where the first item begins with U+FEFF, which the reader drops as an editor's mark
    (`_read_vocab`), keeping the item's own."""
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for i, item in enumerate(vocabulary):
            if i == 0 and item.startswith("\ufeff"):
                out.write("\ufeff")
            out.write(item)
            out.write("\n")


@contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory that replaces ``target`` only if the block succeeds.

    However it ends (Ctrl-C or the CLI's SIGTERM included), no temporary folder stays: each is
    named before it exists and made inside the ``try`` that removes it (`fedhh.data.scratch`;
    before, ``mkdtemp`` made them outside it), and an existing ``target`` is swapped for the new
    one with both signals held, so that the folder is never left without either."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = scratch_path(target.parent, f".{target.name}.")
    try:
        tmp.mkdir(mode=0o700)
        yield tmp
        if target.exists():
            old = scratch_path(target.parent, f".{target.name}.old.")
            try:
                with signals_held():
                    old.mkdir(mode=0o700)
                    os.replace(target, old / target.name)
                    try:
                        os.replace(tmp, target)
                    except BaseException:
                        os.replace(old / target.name, target)  # (back as it was)
                        raise
            finally:
                if target.exists() or not (old / target.name).exists():
                    shutil.rmtree(old, ignore_errors=True)  # (else the only copy: kept)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def atomic_file(target: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Yield ``target`` opened for writing under a temporary sibling name that replaces it only
    if the block succeeds. The name is the writer's own, so processes that write one cache entry
    at once never share a temporary file (mkstemp's would be mode 0600: a cache is not a
    secret)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    exclusive = mode.replace("w", "x")
    try:
        with (open(tmp, exclusive) if "b" in mode
              else open(tmp, exclusive, encoding="utf-8", newline="\n")) as out:
            yield out
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: What reading a damaged .npz raises: besides the OS's and numpy's errors, a truncated or
#: bit-flipped file fails inside zipfile and zlib, and a flipped flag in its directory asks for
#: a password (RuntimeError) or a compression method zipfile lacks (NotImplementedError, a
#: RuntimeError, so not listed again).
NPZ_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error,
                  RuntimeError)


def read_npz(path: Path, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the .npz at ``path`` (a cache beside a dataset, a stored run),
    read whole; one of ``NPZ_UNREADABLE`` when it cannot be read."""
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in names}


def read_cache(path: Path, names: Iterable[str]) -> dict[str, np.ndarray] | None:
    """``read_npz`` of a cache kept beside a dataset, None where it is missing or cannot be
    read: the caller computes it again and rewrites it. One that cannot be read is a warning
    naming it and the error (before, it was rebuilt without a word, and a cache that reads
    back damaged can be the first sign of a failing disk, the dataset's own)."""
    try:
        return read_npz(path, names)
    except FileNotFoundError:
        return None
    except NPZ_UNREADABLE as error:
        log.warning("ignoring unreadable cache %s (it is computed again): %s: %s", path,
                    type(error).__name__, error)
        return None


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity (Python's json reads and writes them; JSON holds
    no such number) as None, at any depth: a stranger's meta.json stats reach `fedhh data
    inspect --json` and a dataset saved again, whose readers parse strict JSON. Before, NaN
    went out as ``NaN``, which such a reader refuses."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def load_dataset(path: str | os.PathLike[str], validate: bool = True,
                 progress: bool = False) -> FederatedDataset:
    """Open a dataset directory memory-mapped; DatasetError names any defect found. With
    ``validate`` every entry is checked (``progress``: a meter counts them,
    `fedhh.data.progress`)."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"dataset directory {root} does not exist")
    meta = _read_meta(root)
    vocabulary = _read_vocab(root / "vocab.txt")
    indptr = _load_array(root / "indptr.npy", (np.int64,))
    items = _load_array(root / "items.npy", (np.int32,))
    counts = _load_array(root / "counts.npy", (np.uint16, np.uint32))
    dataset = FederatedDataset(
        vocabulary,
        indptr,
        items,
        counts,
        name=str(meta.get("name", root.name)),
        provenance=str(meta.get("provenance", "")),
        stats=_finite(dict(meta.get("stats", {}))),
        root=root,
    )
    _check_structure(root, meta, dataset)
    if validate:
        with Meter(progress, f"checking {dataset.name}", dataset.num_entries, " entries",
                   unit_scale=True) as meter:
            _check_vocabulary(root, vocabulary, meta["version"])
            _check_contents(root, dataset, meter)
    return dataset


def _read_meta(root: Path) -> dict[str, Any]:
    try:
        # (a leading byte-order mark is the file's, as vocab.txt's: before, a meta.json saved
        # again by an editor that writes one was "not valid JSON (Unexpected UTF-8 BOM ...)")
        meta = json.loads((root / "meta.json").read_bytes().removeprefix(codecs.BOM_UTF8)
                          .decode("utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{root}/meta.json is missing; not a fedhh dataset") from None
    except UnicodeDecodeError as error:
        raise DatasetError(f"{root}/meta.json: {not_utf8(error)}") from None
    except json.JSONDecodeError as error:
        # (before, Python's words, "line 1 column 9 (char 8)": a third position, from 0)
        raise DatasetError(f"{root}/meta.json: line {error.lineno} column {error.colno}: not "
                           f"valid JSON ({error.msg})") from None
    # (RecursionError: arrays nested thousands deep, which json reads by recursion; before, a
    # traceback out of every command that opened the dataset)
    except RecursionError as error:
        raise DatasetError(f"{root}/meta.json is not valid JSON: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DatasetError(f"{root}/meta.json does not describe a {FORMAT} directory")
    version = meta.get("version")
    if isinstance(version, bool) or version not in VERSIONS:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
        raise DatasetError(
            f"{root}: format version {version!r}, expected "
            + " or ".join(map(str, VERSIONS))
            + ("; it was written by a newer fedhh" if newer else ""))
    for key in ("num_users", "num_entries", "vocabulary_size"):
        value = meta.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise DatasetError(f"{root}/meta.json: {key} must be a non-negative integer, "
                               f"got {value!r}")
    if not isinstance(meta.get("stats", {}), dict):
        raise DatasetError(f"{root}/meta.json: stats must be an object, got {meta['stats']!r}")
    for key in ("name", "provenance"):
        if not isinstance(meta.get(key, ""), str):
            raise DatasetError(f"{root}/meta.json: {key} must be a string, got {meta[key]!r}")
    return meta


def _read_vocab(path: Path) -> tuple[str, ...]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path} is missing") from None
    # (a vocab.txt edited and saved as UTF-16 or UTF-32 is refused as the readers refuse
    # such a dataset: before, one without a byte order mark read as items holding NULs)
    if (problem := wide_encoding_problem(raw)) is not None:
        raise DatasetError(f"{path}: {problem}; a dataset's vocab.txt is UTF-8: save it so")
    try:
        # (a leading byte-order mark is the file's, as every other input file's: before, a
        # vocab.txt saved by an editor that writes one read '\ufeffapple' as its first item,
        # which no user's 'apple' matched)
        text = raw.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as error:
        # (the line, as every other defect of the file is named: before, "position 81233")
        raise DatasetError(f"{path}: {not_utf8(error)}") from None
    # (as read_text read it, in universal-newlines mode: a \r\n line end, or a \r, is a \n)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(lines)


def _load_array(path: Path, dtypes: tuple[type, ...]) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise DatasetError(f"{path} is missing") from None
    except (ValueError, OSError, EOFError) as error:
        raise DatasetError(f"{path} is not a readable .npy array: {error}") from None
    if array.ndim != 1 or array.dtype not in [np.dtype(d) for d in dtypes]:
        raise DatasetError(f"{path} has shape {array.shape} and dtype {array.dtype}; expected 1-D "
                           + " or ".join(np.dtype(d).name for d in dtypes))
    return array


def _check_structure(root: Path, meta: dict[str, Any], ds: FederatedDataset) -> None:
    declared = (meta.get("num_users"), meta.get("num_entries"), meta.get("vocabulary_size"))
    actual = (ds.num_users, ds.num_entries, len(ds.vocabulary))
    if declared != actual:
        raise DatasetError(
            f"{root}: meta.json declares users/entries/vocabulary {declared}, files hold {actual}"
        )
    if ds.indptr.shape[0] < 1 or ds.indptr[0] != 0 or ds.indptr[-1] != ds.num_entries:
        raise DatasetError(f"{root}/indptr.npy does not start at 0 and end at {ds.num_entries}")
    if ds.counts.shape[0] != ds.num_entries:
        raise DatasetError(f"{root}: counts.npy and items.npy differ in length")


def _check_vocabulary(root: Path, vocabulary: tuple[str, ...], version: int) -> None:
    """Items distinct and valid for the format ``version`` (module docstring)."""
    # (the whole vocabulary at once first, in C; item by item only to name a defect's line)
    joined = "\x00".join(vocabulary)
    if (len(set(vocabulary)) == len(vocabulary) and "" not in vocabulary
            and not (_WHITESPACE if version == 1 else _LINE_BREAK).search(joined)
            and not _SURROGATE.search(joined)):
        return
    seen: set[str] = set()
    for i, item in enumerate(vocabulary):
        if version == 1 and (not item or any(ch.isspace() for ch in item)):
            raise DatasetError(f"{root}/vocab.txt line {i + 1}: item {item!r} is empty or "
                               "contains whitespace (format version 1 in meta.json)")
        if (defect := item_defect(item)) is not None:
            raise DatasetError(f"{root}/vocab.txt line {i + 1}: item {item!r} {defect}")
        if item in seen:
            raise DatasetError(f"{root}/vocab.txt line {i + 1}: item {item!r} is repeated")
        seen.add(item)


def _check_contents(root: Path, ds: FederatedDataset, meter: Meter | None = None) -> None:
    if np.any(np.diff(ds.indptr) < 0):
        raise DatasetError(f"{root}/indptr.npy is not non-decreasing")
    vocab = len(ds.vocabulary)
    for lo, hi in user_chunks(ds.indptr, _CHUNK):
        a, b = int(ds.indptr[lo]), int(ds.indptr[hi])
        items = ds.items[a:b]
        if items.size and (int(items.min()) < 0 or int(items.max()) >= vocab):
            raise DatasetError(f"{root}/items.npy holds an item id outside [0, {vocab})")
        if items.size and int(ds.counts[a:b].min()) < 1:
            raise DatasetError(f"{root}/counts.npy holds a zero count")
        ascending = np.diff(items.astype(np.int64)) > 0
        starts = ds.indptr[lo + 1 : hi] - a  # positions where a new user begins
        ascending[starts[(starts > 0) & (starts < items.size)] - 1] = True
        if not np.all(ascending):
            raise DatasetError(f"{root}/items.npy: a user's item ids are not strictly ascending")
        release_pages(ds.items, ds.counts)
        if meter is not None:
            meter.update(b - a)
