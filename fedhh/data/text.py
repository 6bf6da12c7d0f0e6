"""The plain text dataset format: one user per line.

Format (UTF-8; lines end with ``\\n``, a ``\\r`` before it is ignored; a byte-order mark at the
start of the file, as some editors write, is not part of the first item)::

    the cat sat on the mat        <- user 0 holds the:2, cat:1, sat:1, on:1, mat:1
                                  <- user 1 holds nothing (a blank line is a user with no items)
    hello hello world             <- user 2

Items are separated by any whitespace (``str.split()``), and an item is repeated as often as the
user holds it. Whitespace other than the space and the tab (``OTHER_SPACES``: the no-break space
U+00A0, the ideographic space U+3000, U+2028, ``\\v``...) separates items too; an import that
met any says so once, in a warning naming the first line and the characters, and
records it in the dataset's ``stats`` (``Separators``): ``100\\xa0%`` becomes the items ``100``
and ``%``, which a reader of the file does not see.

A blank (or all-whitespace) line is a user with no items, so line ``i`` is always user
``i - 1``: the population size, which the privacy accounting and the simulator's round sizes
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
import csv
import json
import logging
import os
import re
import shlex
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedhh.data.builder import DEFAULT_SHARD_ENTRIES, build_dataset
from fedhh.data.dataset import FederatedDataset, atomic_file
from fedhh.data.progress import Meter
from fedhh.errors import ConfigError, DatasetError
from fedhh.input_files import (
    HEAD_BYTES,
    compressed_problem,
    not_utf8,
    open_input,
    wide_encoding_problem,
)

logger = logging.getLogger(__name__)

# The warnings of the import under way (`Importer`), kept in its dataset's ``stats`` under
# ``IMPORT_WARNINGS``: a cached conversion says them again (`fedhh.data.registry.import_path`).
IMPORT_WARNINGS = "import_warnings"
_SAID: ContextVar[list[str] | None] = ContextVar("fedhh_import_warnings", default=None)


def import_warning(log: logging.Logger, message: str, *args: object) -> None:
    """Log ``message % args`` on ``log`` as a warning of the file's import, and keep it for
    the dataset's ``stats`` when an `Importer` is converting: a file's defects are said at
    every run that reads its cached conversion, not at the first alone."""
    said = _SAID.get()
    if said is not None:
        said.append(message % args if args else message)
    log.warning(message, *args)

# One user's line: far above any real user's items (a million 60-byte items), and a bound on
# what a file without line breaks (a binary file, /dev/zero) can make the reader hold.
MAX_LINE_BYTES = 64 << 20

# The characters ``str.split()`` separates at besides the space, the tab and the line ends:
# every character for which ``str.isspace`` holds (tests/unit/data keeps the two equal).
OTHER_SPACES = ("\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_OTHER_SPACE = re.compile(f"[{OTHER_SPACES}]")
_PLAIN_SPACE = re.compile("[ \t\r\n]+")


class Separators:
    """Where a reader that splits at whitespace (``str.split()``: the text format, LEAF's
    strings) met whitespace other than the space and the tab, and so split what a reader of
    the file sees as one item (``100\\xa0%``, a no-break space, became ``100`` and ``%``):
    documented, but not visible in the file, so an import that met any says so once
    (``warn``) and records it in the dataset's ``stats`` (``STATS_KEY``)."""

    STATS_KEY = "split_at_other_whitespace"
    MARKS_KEY = "lines_beginning_with_byte_order_mark"

    def __init__(self) -> None:
        self.count = 0            # the lines (text) or strings (LEAF) that held any
        self.first = ""           # where the first was: "line 7", "user 'u3'"
        self.example = ""         # its piece between plain spaces that held one
        self.characters: set[str] = set()
        self.marks = 0            # the lines after the first that begin with U+FEFF (text)
        self.first_mark = ""      # the first of them, and its first item
        self.marked = ""

    def see_mark(self, line: str, where: str) -> None:
        """Tally a line after the first that begins with U+FEFF (``where``): a byte-order
        mark, as a file joined after another with ``cat`` brings, kept as part of the line's
        first item (an item may begin with U+FEFF), which is then another item than the one
        the file shows (``\\ufeffword``, not ``word``): said (``warn_marks``), not dropped."""
        self.marks += 1
        if not self.first_mark:
            self.first_mark = where
            self.marked = line.split()[0] if line.split() else line

    def see(self, text: str, where: str) -> None:
        """Tally ``text`` (one line, one string) found at ``where``."""
        if _OTHER_SPACE.search(text) is None:
            return
        self.count += 1
        self.characters.update(_OTHER_SPACE.findall(text))
        if not self.first:
            self.first = where
            self.example = next(piece for piece in _PLAIN_SPACE.split(text)
                                if _OTHER_SPACE.search(piece))

    def stats(self) -> dict[str, object]:
        """The dataset's ``stats`` entries, ``{}`` when nothing was split so and no line
        after the first began with a byte-order mark."""
        stats: dict[str, object] = {}
        if self.count:
            stats[self.STATS_KEY] = {
                "count": self.count, "first": self.first, "example": self.example,
                "characters": [_named(c) for c in sorted(self.characters)]}
        if self.marks:
            stats[self.MARKS_KEY] = {"count": self.marks, "first": self.first_mark,
                                     "item": self.marked}
        return stats

    def warn(self, source: Path, kind: str, unit: str) -> None:
        """One warning for the whole import (none when nothing was split so), and one for the
        lines that began with a byte-order mark, if any."""
        if self.marks:
            import_warning(
                logger,
                "%s: %d line%s after the first begin%s with a byte-order mark (U+FEFF), as a "
                "file joined after another (cat) brings at its start (the first, %s: its item "
                "%r); it is kept as part of the item, another item than the one without it: "
                "remove it if it is a joined file's", source.name, self.marks,
                "" if self.marks == 1 else "s", "s" if self.marks == 1 else "",
                self.first_mark, _cut(self.marked))
        if not self.count:
            return
        pieces = self.example.split()
        read = ("no item" if not pieces else f"the item {_cut(pieces[0])!r}" if len(pieces) == 1
                else "the items " + ", ".join(repr(_cut(p)) for p in pieces[:4])
                + (", ..." if len(pieces) > 4 else ""))
        import_warning(
            logger,
            "%s: %d %s%s hold%s whitespace other than the space and the tab (%s), at which the "
            "%s format separates items as at a space (the first, at %s: %r was read as %s); to "
            "keep such an item whole, write the data as JSON lines (docs/datasets.md)",
            source.name, self.count, unit, "" if self.count == 1 else "s",
            "s" if self.count == 1 else "", ", ".join(_named(c) for c in sorted(self.characters)),
            kind, self.first, _cut(self.example), read)


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _named(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'control')}"


def user_lines(source: Path, kind: str, meter: Meter | None,
               check: Callable[[int, bytes], None] | None = None) -> Iterator[tuple[int, str]]:
    """Each line of a one-user-a-line ``kind`` dataset file ("text", "JSON-lines") with its
    number, decoded; its UTF-8 byte-order mark dropped. ``check`` sees each line's bytes first
    (the format's own refusals); ``meter`` counts the bytes read and is closed at the end."""
    try:
        handle = open_input(source, f"{kind} dataset")
    except OSError as error:
        raise DatasetError(f"cannot read {kind} dataset {source}: {error.strerror}") from None
    except ConfigError as error:  # (a named pipe nobody writes to)
        raise DatasetError(str(error)) from None
    try:
        # (the file's beginning, unread: peek, so that a pipe works as before)
        head = handle.peek(HEAD_BYTES)
        if (problem := compressed_problem(source, head)) is not None:
            raise DatasetError(f"{source}: {problem}")
        if (problem := wide_encoding_problem(head)) is not None:
            raise DatasetError(f"{source}: {problem}; a {kind} dataset is UTF-8: save it so")
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise DatasetError(
                    f"{source}: line {number} is longer than {MAX_LINE_BYTES:,} bytes (one "
                    f"user's items on one line; is this a {kind} dataset?)")
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)  # an editor's mark, not an item's
            if check is not None:
                check(number, raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DatasetError(f"{source}: {not_utf8(error, number)}") from None
            if meter is not None:
                meter.update(len(raw))
            yield number, line
    finally:
        handle.close()
        if meter is not None:
            meter.close()


def refuse_classic_mac(source: Path, kind: str, number: int, raw: bytes) -> None:
    """DatasetError naming the line ends where line ``number`` (``raw``, its bytes) is the
    first and ends in no \\n while it holds a \\r before its end: a file whose lines end with
    \\r alone, as classic Mac OS wrote them, read as one line."""
    if number == 1 and not raw.endswith(b"\n") and b"\r" in raw.rstrip(b"\r"):
        raise DatasetError(
            f"{source}: its lines end with \\r alone (classic Mac OS line ends); a {kind} "
            "dataset has one user per line, each ending with \\n or \\r\\n")


def iter_text_users(
    path: str | os.PathLike[str], *, lowercase: bool = False, meter: Meter | None = None,
    separators: Separators | None = None,
) -> Iterator[Counter[str]]:
    """Yield each line's items as a Counter, in file order (blank lines yield empty Counters);
    ``meter`` counts the bytes read and is closed at the end of the file; ``separators``
    tallies the lines split at whitespace other than the space and the tab."""
    source = Path(path)

    def line_ends(number: int, raw: bytes) -> None:
        # (split() would take the breaks for spaces: every user one user)
        refuse_classic_mac(source, "text", number, raw)
        if b"\r" in raw.rstrip(b"\r\n"):
            # (split() takes it for a space: the lines it ends would be one user's)
            raise DatasetError(
                f"{source}: line {number} holds a \\r that ends no line (\\r\\n does); a "
                "text dataset has one user per line, each ending with \\n or \\r\\n, so "
                "this line's users would be counted as one")

    looked = False
    header: TableHeader | None = None
    spaced: SpacedHeader | None = None
    held: list[Counter[str]] = []  # (the users read while a header waits for its rows)
    for number, line in user_lines(source, "text", meter, line_ends):
        if header is not None and line.strip():
            if header.row(line):
                # (a CSV or TSV file named .txt: before, read silently, every row one user
                # holding its user id as an item, "1,007" or "1" and "007")
                raise DatasetError(
                    f"{source}: line {header.number} is a table's header ({header.shown}): "
                    f"{_COLUMNS_READ}")
            # (a user's item such as "user,item", the line after it no row of that table)
            header = None
            yield from held
            held.clear()
        if spaced is not None and not spaced.see(line, number):
            if spaced.rows > 1 and spaced.every_row:
                raise spaced.refusal(source)
            spaced.warn(source)
            spaced = None
            yield from held
            held.clear()
        if not looked and line.strip():
            looked = True
            if json_user(line):
                raise DatasetError(
                    f"{source}: line {number} is a JSON user (an array of items or an object "
                    "of item counts), whose brackets, quotes and commas the text format would "
                    "take for parts of items ('[\"new', 'york\",'); for a JSON-lines dataset "
                    "name the file .jsonl, or import it with --format jsonl")
            header = table_header(line, number)
            spaced = None if header is not None else spaced_header(line, number)
        if separators is not None:
            separators.see(line, f"line {number}")
            if number > 1 and line.startswith("\ufeff"):
                separators.see_mark(line, f"line {number}")
        user = Counter(line.lower().split() if lowercase else line.split())
        if header is None and spaced is None:
            yield user
        else:
            held.append(user)
    if spaced is not None:
        if spaced.rows > 1 and spaced.every_row:
            raise spaced.refusal(source)
        spaced.warn(source)
    yield from held  # (a header's line with no line after it: a user's items)


# What a text import of a table would read, and how to write it instead.
_COLUMNS_READ = ("the text format reads one user a line, items separated by whitespace, so its "
                 "rows' user ids would be read as items; no format reads columns: write each "
                 "user's items as one JSON array a line, a .jsonl file (docs/datasets.md, "
                 "'JSON lines')")
# The lines after a header of names separated by spaces (``SpacedHeader``) looked at before it
# is taken for a table's or for a user's items.
SPACED_LOOK = 20


# The names a table gives its column of user ids (a header ``user_id,item``; JSON lines'
# records ``{"user_id": 7, "item_id": 42}``: `fedhh.data.jsonl`), lower-cased.
ID_KEYS = frozenset(("user", "user_id", "userid", "uid", "id", "client", "client_id",
                     "device", "device_id", "person", "person_id", "account"))
_FIELD = re.compile(r'"?[A-Za-z_][A-Za-z0-9_ .-]*"?')


@dataclass(frozen=True)
class TableHeader:
    """A line that reads as a CSV or TSV header naming a column of user ids (``table_header``):
    where it is (``number``), as a message shows it (``shown``), its separator and its count
    of columns."""

    number: int
    shown: str
    separator: str
    columns: int

    def row(self, line: str) -> bool:
        """Whether ``line`` reads as one of the table's rows: as many columns at its separator
        (a quoted field, ``"1,000"``, one column, as a CSV reader reads it)."""
        try:
            fields = next(csv.reader([line.rstrip("\r\n")], delimiter=self.separator), [])
        except csv.Error:  # (a field past the csv module's limit: no row a header heads)
            return False
        return len(fields) == self.columns


def table_header(line: str, number: int) -> TableHeader | None:
    """Line ``number`` where it reads as a CSV or TSV header naming a column of user ids
    (``user_id,item``, ``"user";"query"``, ``id<TAB>word``): two or more names, one of them
    ``ID_KEYS``'s, split at one of ``,``, ``;`` or a tab and nothing else; else None. It is a
    table's only where the next line with anything on it is a row of as many columns
    (``TableHeader.row``): ``user,item`` may be a user's one item, and a line ``the cat``
    after it says it is."""
    text = line.strip()
    for separator in (",", ";", "\t"):
        fields = text.split(separator)
        if len(fields) < 2 or any(other in text for other in (",", ";", "\t")
                                  if other != separator):
            continue
        if (all(_FIELD.fullmatch(field.strip()) for field in fields)
                and any(field.strip().strip('"').lower() in ID_KEYS for field in fields)
                and (separator == "\t" or " " not in text)):
            return TableHeader(number, repr(text[:60]), separator, len(fields))
    return None


@dataclass
class SpacedHeader:
    """A first line of two or more names separated by spaces alone, one of them ``ID_KEYS``'s
    (``user item``, ``user_id query``), at line ``number``, as a message shows it (``shown``):
    a table's header, or a user's items. Two words are a user's items as often as a header, so
    one line after it says little: the ``SPACED_LOOK`` lines after it are looked at (``see``),
    and where every one with anything on it is a row (as many fields, a decimal user id in the
    named column) and two or more are, it is a table's (``refusal``); else its words are read
    as a user's items and a warning says so, with how to skip the line (``warn``). Before,
    read silently: every row one user holding its id as an item."""

    number: int
    shown: str
    columns: int
    key: int  # (the column of user ids)
    rows: int = 0
    every_row: bool = True
    first_row: str = ""

    def see(self, line: str, number: int) -> bool:
        """Tally line ``number`` (``line``, after the header); whether to look on."""
        if number > self.number + SPACED_LOOK:
            return False
        if not line.strip():
            return True  # (a user with no items, in a table or not)
        fields = line.split()
        if (len(fields) != self.columns or not fields[self.key].isdecimal()
                or not fields[self.key].isascii()):
            self.every_row = False
            return False
        self.rows += 1
        self.first_row = self.first_row or repr(line.strip()[:60])
        return True

    def refusal(self, source: Path) -> DatasetError:
        return DatasetError(
            f"{source}: line {self.number} is a table's header ({self.shown}), the lines after "
            f"it its rows ({self.first_row}: a user id, then {self.columns - 1:,} more "
            f"column{'' if self.columns == 2 else 's'}): {_COLUMNS_READ}")

    def warn(self, source: Path) -> None:
        # (the output named after the file, quoted: before, `> items.txt` emptied a file of
        # that name, the shell truncating it before sed read it, and a name with a space broke
        # the command)
        import_warning(
            logger,
            "%s: line %d (%s) reads as a table's header, names separated by spaces, one of "
            "them a column of user ids; the text format reads it as one user holding those "
            "words as items. If it is a header, delete that line (sed '%dd' %s > %s: "
            "every line is one user); if the file is a table of user ids and items, write each "
            "user's items as one JSON array a line, a .jsonl file (docs/datasets.md, "
            "'JSON lines')", source.name, self.number, self.shown, self.number,
            shlex.quote(source.name), shlex.quote(f"without-header-{source.name}"))


def spaced_header(line: str, number: int) -> SpacedHeader | None:
    """Line ``number`` as a ``SpacedHeader``: two or more names (``_FIELD``'s, unquoted)
    separated by whitespace alone, one of them ``ID_KEYS``'s; else None."""
    text = line.strip()
    fields = text.split()
    if len(fields) < 2 or any(other in text for other in ",;\t\""):
        return None
    keys = [i for i, field in enumerate(fields) if field.lower() in ID_KEYS]
    if not keys or not all(_FIELD.fullmatch(field) for field in fields):
        return None
    return SpacedHeader(number, repr(text[:60]), len(fields), keys[0])


def json_user(line: str) -> bool:
    """Whether ``line`` is one user of the JSON-lines format (`fedhh.data.jsonl`): a non-empty
    JSON array of strings or object of integer counts. (A text line that is such JSON, its
    items ``["a",`` and ``"b"]``, is a JSON-lines file given as text; an item list's first
    line that is, JSON given as one item a line: `fedhh.data.wordlists.load_item_list`.) A
    raw control character in a string (a tab, ESC) is taken as JSON writes it escaped: the
    line was still written as JSON (before, ``["a<TAB>b"]`` was imported as the text items
    ``["a`` and ``b"]``))."""
    text = line.strip()
    if not text.startswith(("[", "{")):
        return False
    try:
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError):
        return False
    if isinstance(value, list):
        return bool(value) and all(isinstance(item, str) for item in value)
    return isinstance(value, dict) and bool(value) and all(
        isinstance(count, int) for count in value.values())


@dataclass(frozen=True)
class Importer:
    """A format's conversion into a dataset directory (``import_text``, ``import_jsonl``,
    ``import_leaf``): one signature and one body for every format, so they cannot drift.

    ``users`` reads a file of format ``fmt`` (its ``--format``): ``path``, ``lowercase``,
    ``meter``, and ``separators`` when ``splits`` (a format that splits its ``unit``s, lines
    or strings, at whitespace). ``kind`` names the format in messages and ``source_kind`` in
    the provenance (default "``kind`` file"). ``files`` counts the files a source is (LEAF's
    directory, `fedhh.data.leaf`): the meter counts them, or else the bytes of a
    one-user-a-line file."""

    users: Callable[..., Iterator[Counter[str]]]
    fmt: str
    kind: str
    splits: bool = False
    unit: str = "line"
    source_kind: str | None = None
    files: Callable[[Path], int] | None = None

    def __call__(self, path: str | os.PathLike[str], target: str | os.PathLike[str], *,
                 lowercase: bool = False, name: str | None = None,
                 shard_entries: int = DEFAULT_SHARD_ENTRIES, progress: bool = False,
                 require_items: bool = False) -> Path:
        """Convert ``path`` into a dataset directory at ``target`` (atomically); with
        ``progress``, meters count what is read and the shards written; ``require_items``:
        refuse (DatasetError, ``target`` untouched) a source in which no user holds an item."""
        source = Path(path)
        if self.files is None:
            try:
                size = source.stat().st_size
            except OSError as error:
                raise DatasetError(f"cannot read {self.kind} dataset {source}: "
                                   f"{error.strerror}") from None
            metered: dict[str, Any] = {"total": size, "unit": "B", "unit_scale": True}
        else:
            metered = {"total": self.files(source), "unit": "file"}
        stats: dict[str, Any] = {"source_format": self.fmt, "lowercase": lowercase}
        separators = Separators() if self.splits else None
        extra = {} if separators is None else {"separators": separators}

        said: list[str] = []

        def read(meter: Meter) -> Iterator[Counter[str]]:
            yield from self.users(source, lowercase=lowercase, meter=meter, **extra)
            # (after the last user, before the builder writes meta.json)
            if separators is not None:
                stats.update(separators.stats())
                separators.warn(source, self.kind, self.unit)
            if said:
                stats[IMPORT_WARNINGS] = list(said)

        saying = _SAID.set(said)
        try:
            with Meter(progress, f"reading {source.name}", **metered) as meter:
                return build_dataset(
                    read(meter), target, name=name or source.stem,
                    provenance=f"imported from {self.source_kind or f'{self.kind} file'} "
                    f"{source.resolve()}" + (" (lowercased)" if lowercase else ""),
                    stats=stats, shard_entries=shard_entries, progress=progress,
                    require_items=require_items)
        finally:
            _SAID.reset(saying)


import_text = Importer(iter_text_users, "text", "text", splits=True)


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
