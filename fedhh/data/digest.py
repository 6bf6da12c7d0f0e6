"""A dataset's content digest: SHA-256 of what its results are computed from.

The experiments' store keys hold it (``fedhh.experiments.runner.SuiteData``), so a dataset
rebuilt in place with the same name, folder and sizes (another seed of a generator, an edited
file of the same size) is told apart from the one a stored run was computed on.

A loaded dataset's digest is of its files: ``vocab.txt``, ``indptr.npy``, ``items.npy`` and
``counts.npy`` (``CONTENT_FILES``), each streamed once through SHA-256, then SHA-256 of their
names, sizes and digests. ``meta.json`` is left out: its name is part of the identity already,
and its provenance text and statistics change no result. An in-memory dataset (no directory)
is digested from its vocabulary and arrays (dtype, shape, bytes) under another prefix, so the
two kinds never share a digest.

Hashing the default dataset's 3.7 GB takes seconds, so each file's digest is cached in the
dataset's directory (``digest.json``, beside the ground-truth caches), keyed by the file's size,
modification and change times (ns) and inode, as ``fedhh.data.registry`` keys an import: the
modification time alone misses a file rewritten with the same size and its old time set back
(``touch -d``, ``cp -p``); a change time cannot be set back and a copy is a new inode. A file
changed less than ``SETTLE_NS`` before it was hashed is not cached (a write within the same
timestamp tick as the hash would leave its time as it was: git's "racy" entries), so it is
hashed again next time. A cache that cannot be read is ignored and one that cannot be written
(a read-only directory) is not: neither changes a digest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.data.dataset import FederatedDataset, atomic_file
from fedhh.errors import DatasetError

log = logging.getLogger(__name__)

CONTENT_FILES = ("vocab.txt", "indptr.npy", "items.npy", "counts.npy")
CACHE_FILE = "digest.json"
CACHE_VERSION = 1
SETTLE_NS = 2_000_000_000  # a file changed within this of its hashing is not cached
_HEX = frozenset("0123456789abcdef")
_CHUNK = 1 << 24


def content_digest(dataset: FederatedDataset) -> str:
    """The SHA-256 (hex) of the dataset's contents: of its files if it was loaded from a
    directory (``directory_digest``), else of its vocabulary and arrays."""
    if dataset.root is not None:
        return directory_digest(dataset.root)
    outer = hashlib.sha256(b"fedhh-dataset-arrays\n")
    vocabulary = hashlib.sha256()
    for item in dataset.vocabulary:
        vocabulary.update(item.encode("utf-8", "surrogatepass") + b"\n")
    outer.update(b"vocabulary\0" + vocabulary.hexdigest().encode() + b"\n")
    for name in ("indptr", "items", "counts"):
        array = np.ascontiguousarray(getattr(dataset, name))
        outer.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        data = hashlib.sha256()
        flat = array.reshape(-1).view(np.uint8)
        for lo in range(0, flat.size, _CHUNK):  # (no copy of the whole array at once)
            data.update(flat[lo:lo + _CHUNK].tobytes())
        outer.update(data.hexdigest().encode() + b"\n")
    return outer.hexdigest()


def directory_digest(root: str | os.PathLike[str]) -> str:
    """The SHA-256 (hex) of a dataset directory's ``CONTENT_FILES`` (module docstring), each
    file's digest read from the directory's cache when the file is unchanged since, else
    streamed (and cached). DatasetError when a file cannot be read."""
    base = Path(root)
    cached = _read_cache(base)
    entries: dict[str, dict[str, Any]] = {}
    hashed = False
    outer = hashlib.sha256(b"fedhh-dataset-files\n")
    for name in CONTENT_FILES:
        path = base / name
        try:
            info = path.stat()
            stamp = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
            entry = cached.get(name)
            if entry is None or entry["stamp"] != stamp:
                entry = _hashed(path, stamp, max(info.st_mtime_ns, info.st_ctime_ns))
                hashed = True
        except OSError as error:
            raise DatasetError(f"{path}: cannot read it to digest the dataset's contents: "
                               f"{error.strerror or error}") from error
        if entry["stamp"] is not None:
            entries[name] = entry
        outer.update(f"{name}\0{info.st_size}\0{entry['sha256']}\n".encode())
    if hashed and entries:
        _write_cache(base, entries)
    return outer.hexdigest()


def _hashed(path: Path, stamp: list[int], changed_ns: int) -> dict[str, Any]:
    """A file's cache entry, its contents streamed through SHA-256; its stamp None (not to be
    cached) when it changed less than ``SETTLE_NS`` before (module docstring)."""
    started = time.time_ns()
    with open(path, "rb") as stream:
        digest = hashlib.file_digest(stream, "sha256").hexdigest()
    return {"stamp": stamp if changed_ns <= started - SETTLE_NS else None, "sha256": digest}


def _read_cache(base: Path) -> dict[str, dict[str, Any]]:
    """The cached entries of ``base`` that are well formed (anything else: none)."""
    path = base / CACHE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    # (RecursionError: arrays nested thousands deep; before, a traceback out of every command
    # that digested the dataset)
    except (OSError, ValueError, RecursionError) as error:
        log.info("ignoring the digest cache %s (the files are hashed again): %s", path, error)
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION \
            or not isinstance(data.get("files"), dict):
        log.info("ignoring the digest cache %s (the files are hashed again): not a version "
                 "%d cache", path, CACHE_VERSION)
        return {}
    return {name: entry for name, entry in data["files"].items() if _well_formed(entry)}


def _well_formed(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    stamp, digest = entry.get("stamp"), entry.get("sha256")
    return (isinstance(stamp, list) and len(stamp) == 4
            and all(type(x) is int for x in stamp)  # (not bool, not float)
            and isinstance(digest, str) and len(digest) == 64 and set(digest) <= _HEX)


def _write_cache(base: Path, entries: dict[str, dict[str, Any]]) -> None:
    try:
        with atomic_file(base / CACHE_FILE, "w") as out:
            out.write(json.dumps({"version": CACHE_VERSION, "files": entries}, indent=1,
                                 sort_keys=True) + "\n")
    except OSError as error:  # a read-only dataset directory: just do not cache
        log.info("not caching the dataset's digest at %s: %s", base / CACHE_FILE, error)
