"""The JSON-lines dataset format: one user per line, items that may hold spaces.

The text format (`fedhh.data.text`) splits a line at whitespace, so ``new york`` there is two
items. In this format each line is one JSON value, so an item is any JSON string: a phrase, a
search query, ``1 000``, a name with a no-break space. Format (UTF-8, one JSON value a line;
``\\n`` or ``\\r\\n`` line ends; a byte-order mark at the start of the file, or of any line as
files joined with ``cat`` have, is ignored)::

    ["new york", "new york", "how to"]     <- user 0 holds new york:2, how to:1
    {"new york": 3, "san francisco": 1}    <- user 1 holds new york:3, san francisco:1
                                           <- user 2 holds nothing (a blank line, as in text)
    []                                     <- user 3 holds nothing

A line is either an array of item strings, each repeated as often as the user holds it, or an
object mapping each item to its count (a positive integer). An item is a non-empty string
without a line break (``\\n``, ``\\r``, U+2028, ...: `fedhh.data.dataset.item_defect`) and
without a lone surrogate (``"\\ud800"`` is valid JSON but no Unicode character). Items are taken
exactly as written, spaces at either end included (``" new york"`` is its own item), unless
``lowercase=True``, which applies ``str.lower()`` to every item.

Reading is strict: anything else (not JSON, a number or string as the line, an item that is not
a string, a count that is not a positive integer, ``1.0`` and ``true`` included, a key given
twice in one object, NaN) is a DatasetError naming the file, the line and the item's position
in it, both counted from 1 as an editor counts lines (before, items were counted from 0: the
second item of line 2 was "line 2: item 1"). Line ``i`` is always user ``i - 1``, so the
population size is the number of lines.
Reading streams the file line by line into `ShardedBuilder`, as the text format does.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fedhh.data.dataset import FederatedDataset, atomic_file, item_defect
from fedhh.data.progress import Meter
from fedhh.data.text import ID_KEYS, Importer, import_warning, refuse_classic_mac, user_lines
from fedhh.errors import DatasetError

MAX_COUNT = (1 << 32) - 1  # (counts are stored as uint32 at most)

logger = logging.getLogger(__name__)


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's (key, value) pairs in order, duplicates kept (to be refused)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _Number:
    """A JSON number no count can be, kept as the file wrote it: a fraction or exponent
    (``1e5``, ``1.0``), an integer too long for a count, or ``-0``. A message shows it so (before,
    Python's reading: ``1e5`` as 100000.0, ``1e400`` as inf), and an integer of thousands of
    digits is no longer "not JSON" with advice to call sys.set_int_max_str_digits()."""

    def __init__(self, text: str) -> None:
        self.text = text


def _integer(text: str) -> int | _Number:
    # (a count is 10 digits at most; ``-0``, which int() reads as 0, no count either: shown
    # so, an item written ``"-0"`` not ``"0"``, another item, as the message said before)
    return int(text) if len(text) <= 20 and text != "-0" else _Number(text)


def loads(text: str, **hooks: Any) -> Any:
    """JSON ``text`` as fedhh's JSON readers read it (JSON lines, LEAF, .json item lists): a
    number no count can be kept as the file wrote it (``_Number``), and NaN or Infinity, no
    JSON, refused (ValueError); ``hooks``: json.loads's others."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_Number,
                      parse_int=_integer, **hooks)


def shown_value(value: object, limit: int = 60) -> str:
    """A string as Python writes it (``'new york'``, escapes visible); any other value as JSON
    wrote it (``true``, ``null``, ``["b"]``, ``1e5``: before, ``True``, ``None``, ``['b']``,
    ``100000.0``), cut to ``limit`` characters."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else text[:limit - 4] + "...'"
    parts: list[str] = []
    _write(value, parts, limit)
    text = "".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _write(value: object, parts: list[str], limit: int) -> None:
    """Appends ``value``'s JSON text to ``parts`` until it holds ``limit`` characters (a line
    may hold every user's items, or arrays nested hundreds deep: written no further)."""
    if sum(map(len, parts)) > limit:
        return
    if isinstance(value, dict):  # (as json.loads gives an object without _Pairs)
        value = _Pairs(value.items())
    if isinstance(value, _Number):
        parts.append(value.text)
    elif isinstance(value, list | _Pairs):
        pairs = isinstance(value, _Pairs)
        parts.append("{" if pairs else "[")
        for nth, element in enumerate(value):
            parts.append(", " if nth else "")
            if pairs:
                parts.append(_json_string(element[0]) + ": ")
            _write(element[1] if pairs else element, parts, limit)
            if sum(map(len, parts)) > limit:
                return
        parts.append("}" if pairs else "]")
    elif isinstance(value, str):
        parts.append(_json_string(value))
    else:
        parts.append(json.dumps(value, ensure_ascii=False))


def _json_string(text: str) -> str:
    """``text`` as a JSON string for a message: its characters as they are but for those a
    terminal would act on or that hide (``str.isprintable``'s), written as JSON escapes them
    (``"\\u202eevil"``; before, a string inside an array or object was written raw, and its
    U+202E reversed the rest of the error's line, as a top-level string's ``repr`` never did)."""
    return "".join(char if char.isprintable() else json.dumps(char)[1:-1]
                   for char in json.dumps(text, ensure_ascii=False))


def _parse(source: Path, number: int, line: str) -> Counter[str]:
    """One line's user (module docstring)."""
    where = f"{source}: line {number}"
    try:
        # (the line's own end is no part of its value: before, a line cut inside a string, as
        # a copy cut short leaves it, was "a raw control character (\x0a) inside a string")
        value = loads(line.rstrip("\r\n"), object_pairs_hook=_Pairs)
    except ValueError as error:  # (json.JSONDecodeError too)
        if (isinstance(error, json.JSONDecodeError) and error.msg.startswith("Invalid control")
                and error.pos < len(line)):
            raise DatasetError(f"{where}: not JSON: {raw_control(line[error.pos])} inside a "
                               f"string (column {error.colno}); JSON holds a control character "
                               "only escaped, as json.dumps writes it (\\t, \\u0000)") from None
        if (isinstance(error, json.JSONDecodeError) and error.msg == "Extra data"
                and "\r" in line[:error.pos]):
            # (a \r that ends no line, as a file edited on two systems holds among its \n ones:
            # JSON reads it as a space, so the two users it ends read as one line's two values;
            # before, "not JSON: Extra data (column 7)" and advice on files of one JSON array)
            raise DatasetError(f"{where} holds a \\r that ends no line (\\r\\n does); a JSON-lines "
                               "dataset has one user per line, each ending with \\n or \\r\\n, so "
                               "this line's users would be read as one") from None
        detail = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
        column = f" (column {error.colno})" if isinstance(error, json.JSONDecodeError) else ""
        if isinstance(error, json.JSONDecodeError) and error.pos >= len(line.rstrip()):
            # (before, "(column 1)": the line's own "\n" is where JSON found it wanting)
            column = " (the line ends before its JSON value does)"
        elif isinstance(error, json.JSONDecodeError) and error.msg.startswith("Unterminated"):
            column = f" (column {error.colno}; the line ends inside it)"
        raise DatasetError(f"{where}: not JSON: {detail}{column}; each line is one user: a "
                           "JSON array of items or an object of item counts"
                           + (_ONE_VALUE if number == 1 and line.lstrip()[:1] in ("[", "{")
                              else "")) from None
    except RecursionError:  # (json recurses once per nested array: before, a traceback)
        raise DatasetError(f"{where}: JSON nested too deeply; each line is one user: a JSON "
                           "array of items or an object of item counts") from None
    users: Counter[str] = Counter()
    if isinstance(value, _Pairs):
        for nth, (item, count) in enumerate(value, start=1):
            _check(where, nth, item)
            if isinstance(count, bool) or not isinstance(count, int) or not (
                    1 <= count <= MAX_COUNT):
                # (an object parses as _Pairs, a list too: "that object" names it so)
                lists = [(key, held) for key, held in value if isinstance(held, list)]
                record = (f"; an object is one user's item counts, not a record: to give the "
                          f"items under {shown_value(lists[0][0])}, write that "
                          f"{json_kind(lists[0][1])} alone on the line" if lists else "")
                if len(lists) > 1 and len(lists) == len(value):  # (users keyed by name)
                    record = "; an object is one user's item counts" + _ONE_VALUE
                elif not lists and isinstance(count, str) and (
                        not (count.isascii() and count.isdigit())  # (not a count in quotes)
                        or any(type(held) is int for _, held in value)):
                    # (a table's row as pandas' to_json(orient="records", lines=True) writes
                    # it, {"user": 7, "item": "new york"}: before, the count alone was named)
                    record = _RECORD
                raise DatasetError(
                    f"{where}: item {nth} ({shown_value(item)}): its count must be an integer "
                    f"from 1 to {MAX_COUNT:,}, got {shown_value(count)}{record}")
            if item in users:
                raise DatasetError(f"{where}: item {nth} ({shown_value(item)}) is a key given "
                                   "before in this object; give each item once, with its count")
            users[item] = count
        return users
    if isinstance(value, list):
        for nth, item in enumerate(value, start=1):
            if isinstance(item, list):  # (an object parses as _Pairs, a list too)
                raise DatasetError(f"{where}: item {nth} ({shown_value(item)}) is a JSON "
                                   f"{json_kind(item)}, not a string; a line is one user's items"
                                   + _ONE_VALUE)
            _check(where, nth, item)
            users[item] += 1
        return users
    raise DatasetError(f"{where}: a JSON {json_kind(value)}; each line is one user: a JSON "
                       "array of items (a repeated item counts again) or an object of item "
                       "counts")


def raw_control(char: str) -> str:
    """A control character JSON holds only escaped, named for a message: ``a raw tab
    (\\x09)``, ``a raw control character (\\x00)`` (before, the line's error was "Invalid
    control character at (column 4)", naming neither the character nor the fix, with advice
    on files of one JSON array that did not apply)."""
    name = {"\t": "tab", "\r": "carriage return", "\b": "backspace",
            "\f": "form feed"}.get(char, "control character")
    return f"a raw {name} (\\x{ord(char):02x})"


# (a newcomer's JSON: json.dump(users, f) writes one array of every user on one line, with
# indent= over many; before, "item 0 (['a', 'b']) is a list, not a string" and "not JSON:
# Expecting value (column 2)" said nothing of the file's shape)
_ONE_VALUE = ("; if the file is one JSON array (or object) of every user, as json.dump writes "
              "it, write each user on a line of its own instead: one json.dumps(user) a line, "
              "no indent (docs/datasets.md, 'JSON lines')")


_RECORD = ("; an object is one user's item counts ({\"new york\": 3}), not a record of "
           "fields: for a table of (user, item) rows, write each user's items as one JSON "
           "array a line (docs/datasets.md, 'JSON lines')")


def _check(where: str, nth: int, item: object) -> None:
    if not isinstance(item, str):
        shown = shown_value(item)
        raise DatasetError(f"{where}: item {nth} ({shown}) {not_a_string(item, shown)}")
    if (defect := item_defect(item)) is not None:
        raise DatasetError(f"{where}: item {nth} ({shown_value(item)}) {defect}")


def not_a_string(value: object, shown: str) -> str:
    """The defect of a JSON ``value`` given for an item (``shown``: ``shown_value``'s), by
    JSON's names (before, "is a int", "is a list"); a number or truth value that is an item,
    a ZIP code or a year, is one in quotes, as it says (JSON lines, a .json item list)."""
    quoted = (f"; an item is a JSON string: {json.dumps(shown)}"
              if isinstance(value, int | _Number) and not shown.endswith("...") else "")
    return f"is a JSON {json_kind(value)}, not a string{quoted}"


def json_kind(value: object) -> str:
    """JSON's name for a parsed value's kind, for messages (before, Python's: ``int``,
    ``NoneType``, ``list``)."""
    return {str: "string", int: "number", float: "number", _Number: "number", bool: "boolean",
            type(None): "null", list: "array", dict: "object", _Pairs: "object"}.get(
                type(value), type(value).__name__)


def iter_jsonl_users(
    path: str | os.PathLike[str], *, lowercase: bool = False, meter: Meter | None = None
) -> Iterator[Counter[str]]:
    """Yield each line's items as a Counter, in file order (blank lines yield empty Counters);
    ``meter`` counts the bytes read and is closed at the end of the file."""
    source = Path(path)

    def line_ends(number: int, raw: bytes) -> None:
        # (before, "line 1: not JSON: Extra data (column 11)", then how to split one JSON
        # array of every user into lines, which it was not)
        refuse_classic_mac(source, "JSON-lines", number, raw)

    records = _Records(source)
    for number, line in user_lines(source, "JSON-lines", meter, line_ends):
        # (a byte-order mark before a later line's JSON, as files joined with cat carry: no
        # item's, as outside the value; before, "not JSON: Unexpected UTF-8 BOM (decode using
        # utf-8-sig)")
        line = line.removeprefix("\ufeff")
        if not line.strip():
            yield Counter()
            continue
        user = _parse(source, number, line)
        records.see(number, line, user)
        if lowercase:
            lowered: Counter[str] = Counter()
            for item, count in user.items():
                lowered[item.lower()] += count
                if lowered[item.lower()] > MAX_COUNT:
                    # (before, the builder's "an item count of 4294967296 exceeds 2^32 - 1",
                    # naming neither the file nor the line nor the items)
                    merged = [key for key in user if key.lower() == item.lower()]
                    raise DatasetError(
                        f"{source}: line {number}: --lowercase makes "
                        f"{', '.join(map(shown_value, merged))} one item, "
                        f"{shown_value(item.lower())}, whose count, their sum, is above "
                        f"{MAX_COUNT:,}")
            user = lowered
        yield user
    records.warn()


class _Records:
    """Whether a file's first lines (``LINES``) read as a table's records, ``{"user_id": 7,
    "item_id": 42}`` as pandas' to_json(orient="records", lines=True) writes a table of
    numbers: each is a valid object of item counts, so the file read as users holding the
    items ``user_id`` and ``item_id``, the items themselves lost, and nothing said so. Told
    by a key named as an id (``text.ID_KEYS``) in every line's object, a different count in each:
    said in a warning (``warn``), not refused, since an item may be so named."""

    LINES = 1000

    def __init__(self, source: Path) -> None:
        self.source = source
        self.key: str | None = None
        self.counts: set[int] = set()
        self.lines = 0
        self.first = 0

    def see(self, number: int, line: str, user: Counter[str]) -> None:
        """Tally line ``number`` (``line``, read as ``user``), a user with items."""
        if self.lines >= self.LINES or (self.lines and self.key is None):
            return
        if not self.lines:
            self.first = number
            self.key = next((key for key in user if key.lower() in ID_KEYS), None)
        self.lines += 1
        if self.key is None:
            return
        if (not line.lstrip().startswith("{") or self.key not in user
                or user[self.key] in self.counts):
            self.key = None
            return
        self.counts.add(user[self.key])

    def warn(self) -> None:
        """The warning, where every line tallied (two or more) read as a record."""
        if self.key is None or self.lines < 2:
            return
        last = "" if self.lines < self.LINES else f" (the first {self.LINES:,} lines)"
        import_warning(
            logger,
            "%s: every line%s is an object holding the key %s, a different count on each "
            "line, as a table's records are ({%s: 7, \"item\": 42}); it was read as item "
            "counts, every user holding the item %s: if the file is a table of (user, item) "
            "rows, write each user's items as one JSON array a line, items as JSON strings "
            "(docs/datasets.md, 'JSON lines')", self.source.name, last, shown_value(self.key),
            _json_string(self.key), shown_value(self.key))


import_jsonl = Importer(iter_jsonl_users, "jsonl", "JSON-lines")


def write_jsonl(dataset: FederatedDataset, path: str | os.PathLike[str]) -> Path:
    """Export a dataset in this format: one object of item counts a user (items in id order),
    non-ASCII written as it is."""
    out = Path(path)
    vocab = dataset.vocabulary
    with atomic_file(out, "w") as handle:
        for user in range(dataset.num_users):
            items, counts = dataset.user_items(user)
            row = {vocab[i]: int(c) for i, c in zip(items.tolist(), counts.tolist(), strict=True)}
            handle.write(json.dumps(row, ensure_ascii=False))
            handle.write("\n")
    return out
