"""The plain text dataset format: one user per line.

Format (UTF-8; lines end with ``\\n``, a ``\\r`` before it is ignored; a byte-order mark at the
start of the file, as some editors write, is not part of the first item)::

    the cat sat on the mat        <- user 0 holds the:2, cat:1, sat:1, on:1, mat:1
                                  <- user 1 holds nothing (a blank line is a user with no items)
    hello hello world             <- user 2

Items are separated by any whitespace (``str.split()``), and an item is repeated as often as the
user holds it. A blank (or all-whitespace) line is a user with no items, so line ``i`` is always
user ``i - 1``: the population size, which the privacy accounting and the simulator's round sizes
depend on, is the number of lines. Items are taken as written unless ``lowercase=True``, which
applies ``str.lower()`` to every item.

Reading streams the file line by line into `ShardedBuilder`, so the whole text is never held in
memory. Bytes that are not UTF-8 give a DatasetError naming the file and line.

An item here holds no whitespace: for phrases and queries (``new york``), use the JSON-lines
format (`fedhh.data.jsonl`), whose items are JSON strings. A file whose first non-blank line is
a user of that format (a JSON array of strings, an object of integer counts) is refused, naming
the line and the way to import it: read as text, its items were pieces of JSON.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from fedhh.data.builder import DEFAULT_SHARD_ENTRIES, build_dataset
from fedhh.data.dataset import FederatedDataset, atomic_file
from fedhh.data.progress import Meter
from fedhh.errors import DatasetError

logger = logging.getLogger(__name__)

# One user's line: far above any real user's items (a million 60-byte items), and a bound on
# what a file without line breaks (a binary file, /dev/zero) can make the reader hold.
MAX_LINE_BYTES = 64 << 20


def user_lines(source: Path, kind: str, meter: Meter | None,
               check: Callable[[int, bytes], None] | None = None) -> Iterator[tuple[int, str]]:
    """Each line of a one-user-a-line ``kind`` dataset file ("text", "JSON-lines") with its
    number, decoded; its UTF-8 byte-order mark dropped. ``check`` sees each line's bytes first
    (the format's own refusals); ``meter`` counts the bytes read and is closed at the end."""
    try:
        handle = open(source, "rb")  # noqa: SIM115 - closed in the finally below
    except OSError as error:
        raise DatasetError(f"cannot read {kind} dataset {source}: {error.strerror}") from None
    try:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise DatasetError(
                    f"{source}: line {number} is longer than {MAX_LINE_BYTES:,} bytes (one "
                    f"user's items on one line; is this a {kind} dataset?)")
            if number == 1:
                if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                    raise DatasetError(
                        f"{source}: it is UTF-16 (it starts with the byte order mark "
                        f"{raw[:2].hex(' ').upper()}); a {kind} dataset is UTF-8: save it so")
                raw = raw.removeprefix(codecs.BOM_UTF8)  # an editor's mark, not an item's
            if check is not None:
                check(number, raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DatasetError(
                    f"{source}: line {number}: not UTF-8 (byte {error.start} of the line: "
                    f"{raw[error.start:error.start + 1]!r})"
                ) from None
            if meter is not None:
                meter.update(len(raw))
            yield number, line
    finally:
        handle.close()
        if meter is not None:
            meter.close()


def iter_text_users(
    path: str | os.PathLike[str], *, lowercase: bool = False, meter: Meter | None = None
) -> Iterator[Counter[str]]:
    """Yield each line's items as a Counter, in file order (blank lines yield empty Counters);
    ``meter`` counts the bytes read and is closed at the end of the file."""
    source = Path(path)

    def line_ends(number: int, raw: bytes) -> None:
        if number == 1 and not raw.endswith(b"\n") and b"\r" in raw.rstrip(b"\r"):
            # (split() would take the breaks for spaces: every user one user)
            raise DatasetError(
                f"{source}: its lines end with \\r alone (classic Mac OS line ends); "
                "a text dataset has one user per line, each ending with \\n or \\r\\n")
        if b"\r" in raw.rstrip(b"\r\n"):
            # (split() takes it for a space: the lines it ends would be one user's)
            raise DatasetError(
                f"{source}: line {number} holds a \\r that ends no line (\\r\\n does); a "
                "text dataset has one user per line, each ending with \\n or \\r\\n, so "
                "this line's users would be counted as one")

    looked = False
    for number, line in user_lines(source, "text", meter, line_ends):
        if not looked and line.strip():
            looked = True
            if _json_user(line):
                raise DatasetError(
                    f"{source}: line {number} is a JSON user (an array of items or an object "
                    "of item counts), whose brackets, quotes and commas the text format would "
                    "take for parts of items ('[\"new', 'york\",'); for a JSON-lines dataset "
                    "name the file .jsonl, or import it with --format jsonl")
        yield Counter(line.lower().split() if lowercase else line.split())


def _json_user(line: str) -> bool:
    """Whether ``line`` is one user of the JSON-lines format (`fedhh.data.jsonl`): a non-empty
    JSON array of strings or object of integer counts. (A text line that is such JSON, its
    items ``["a",`` and ``"b"]``, is a JSON-lines file given as text.)"""
    text = line.strip()
    if not text.startswith(("[", "{")):
        return False
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if isinstance(value, list):
        return bool(value) and all(isinstance(item, str) for item in value)
    return isinstance(value, dict) and bool(value) and all(
        isinstance(count, int) for count in value.values())


def import_users(users: Callable[..., Iterator[Counter[str]]], fmt: str, kind: str,
                 path: str | os.PathLike[str], target: str | os.PathLike[str], *,
                 lowercase: bool, name: str | None, shard_entries: int, progress: bool,
                 require_items: bool) -> Path:
    """``import_text``'s work for the one-user-a-line format ``fmt`` (its ``--format``) whose
    reader is ``users`` (``path``, ``lowercase``, ``meter``), named ``kind`` in messages."""
    source = Path(path)
    try:
        size = source.stat().st_size
    except OSError as error:
        raise DatasetError(f"cannot read {kind} dataset {source}: {error.strerror}") from None
    with Meter(progress, f"reading {source.name}", size, "B", unit_scale=True) as meter:
        return build_dataset(
            users(source, lowercase=lowercase, meter=meter), target,
            name=name or source.stem,
            provenance=f"imported from {kind} file {source.resolve()}"
            + (" (lowercased)" if lowercase else ""),
            stats={"source_format": fmt, "lowercase": lowercase},
            shard_entries=shard_entries, progress=progress, require_items=require_items)


def import_text(
    path: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    lowercase: bool = False,
    name: str | None = None,
    shard_entries: int = DEFAULT_SHARD_ENTRIES,
    progress: bool = False,
    require_items: bool = False,
) -> Path:
    """Convert a text-format file into a dataset directory at ``target`` (atomically); with
    ``progress``, meters count the bytes read and the shards written; ``require_items``:
    refuse (DatasetError, ``target`` untouched) a file in which no user holds an item."""
    return import_users(iter_text_users, "text", "text", path, target, lowercase=lowercase,
                        name=name, shard_entries=shard_entries, progress=progress,
                        require_items=require_items)


def write_text(dataset: FederatedDataset, path: str | os.PathLike[str]) -> Path:
    """Export a dataset in the text format (items repeated, users in order, ids ascending).
    DatasetError, nothing written, if an item holds whitespace, which the text format would
    read as two items (`fedhh.data.jsonl.write_jsonl` writes any item). A file whose first item
    begins with U+FEFF starts with a byte-order mark, which the reader drops as an editor's,
    keeping the item's own."""
    out = Path(path)
    vocab = dataset.vocabulary
    spaced = next((item for item in vocab if any(ch.isspace() for ch in item)), None)
    if spaced is not None:
        raise DatasetError(f"item {spaced!r} holds whitespace, which the text format reads as "
                           "between items; export it as JSON lines (fedhh.data.jsonl)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out, "w") as handle:
        first = dataset.user_items(0)[0] if dataset.num_users else None
        if first is not None and len(first) and vocab[int(first[0])].startswith("\ufeff"):
            handle.write("\ufeff")  # (read as a mark: the item's own U+FEFF is kept after it)
        for user in range(dataset.num_users):
            items, counts = dataset.user_items(user)
            words = [" ".join([vocab[i]] * int(c)) for i, c in zip(items.tolist(),
                                                                 counts.tolist(), strict=True)]
            handle.write(" ".join(words))
            handle.write("\n")
    return out
