"""Word lists that ship inside registry packages, and item-list files (deny lists).

- `wordfreq_frequencies`: the English word-frequency list of the ``wordfreq`` package (Speer et
  al., a blend of Wikipedia, subtitles, news, books, web text, Twitter and Reddit), read straight
  from the package's data file with msgpack. We do not import ``wordfreq`` itself: we only need
  the numbers, and importing it pulls in ftfy, regex and langcodes.
- `warm_start_list`: the public warm-start deny list, the analogue of the paper's top 2000 words
  of Twitter Sentiment140. It comes from a different source than the synthetic population: the
  English frequency list of ``pyspellchecker`` (built by its author from the OpenSubtitles 2018
  corpus of OPUS, cleaned with include/exclude lists; MIT licence). Subtitles are conversational
  English, as tweets are, and they are not the distribution synthetic-reddit is drawn from, so
  the warm start is useful but imperfect, as in the paper.
- `load_item_list` / `write_item_list`: files with one item per line (UTF-8), the format that
  ``--deny-list PATH`` reads. An item may hold spaces inside (``new york``), as a dataset's may,
  but not at either end: what an editor shows as ``new york`` may end in a space no one sees
  (or that the editor trims on save), and a deny list that silently named another item than the
  one meant would let that item through, so such a line is refused (`listed_item_defect`), as
  is one that begins or ends with an invisible direction mark (U+200E, U+200F, U+061C) or
  isolate (U+2066 to U+2069): the console sets a Hebrew or Arabic item between two marks
  (`fedhh.codec.shown.isolated`), the web demo page between two isolates
  (`fedhh.codec.shown.page_isolated`), and an item copied from either would carry them. A
  file named ``.json`` is read as one JSON array of item strings instead, each item exact
  (``[" new york", "new york "]``): a JSON-lines dataset's items may begin or end with a space,
  and the one-a-line form cannot name them.
"""

from __future__ import annotations

import codecs
import gzip
import importlib.util
import json
import logging
import os
from pathlib import Path

import numpy as np

from fedhh.data.dataset import atomic_file, item_defect
from fedhh.data.jsonl import loads, not_a_string, raw_control, shown_value
from fedhh.data.text import json_user
from fedhh.errors import DatasetError
from fedhh.input_files import (
    JSON_LINES_SUFFIXES,
    LIST_FILE_BYTES,
    not_utf8,
    read_whole,
    wide_encoding_problem,
)

logger = logging.getLogger(__name__)

WARM_START_SOURCE = (
    "pyspellchecker's English word-frequency list (spellchecker/resources/en.json.gz), built "
    "from the OpenSubtitles 2018 corpus (OPUS) by the pyspellchecker project, MIT licence"
)


def _package_file(package: str, *parts: str) -> Path:
    """A data file inside an installed package, located without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise DatasetError(f"the package {package!r} is not installed; it ships the data needed")
    path = Path(spec.origin).parent.joinpath(*parts)
    if not path.is_file():
        raise DatasetError(f"{path} is missing from the installed {package!r} package")
    return path


def wordfreq_frequencies(lang: str = "en", wordlist: str = "large") -> tuple[list[str], np.ndarray]:
    """Words and frequencies of a wordfreq list, most frequent first (ties in file order).

    wordfreq's "cBpack" file is gzipped msgpack: a header ``{"format": "cB", "version": 1}``
    followed by buckets; bucket i holds the words whose frequency rounds to 10^(-i/100).
    Multi-digit numbers appear with their digits replaced by 0 ("0000" stands for all 4-digit
    numbers), as wordfreq stores them.
    """
    import msgpack  # a dependency of wordfreq

    path = _package_file("wordfreq", "data", f"{wordlist}_{lang}.msgpack.gz")
    try:
        pack = msgpack.unpackb(gzip.decompress(path.read_bytes()), raw=False)
    except (OSError, ValueError, msgpack.exceptions.ExtraData) as error:
        raise DatasetError(f"{path} is not a readable wordfreq list: {error}") from None
    if not pack or pack[0] != {"format": "cB", "version": 1}:
        raise DatasetError(f"{path}: unexpected wordfreq header {pack[0] if pack else None!r}")
    words: list[str] = []
    freqs: list[float] = []
    for index, bucket in enumerate(pack[1:]):
        freq = 10.0 ** (-index / 100.0)
        for word in bucket:
            words.append(str(word))
            freqs.append(freq)
    return words, np.asarray(freqs, dtype=np.float64)


def warm_start_counts() -> list[tuple[str, int]]:
    """pyspellchecker's English (word, count) pairs, most frequent first (ties by word)."""
    return spellchecker_counts("en")


def spellchecker_counts(lang: str) -> list[tuple[str, int]]:
    """pyspellchecker's (word, count) pairs of one language (``en``, ``de``, ...), most
    frequent first (ties by word); its author built them from OpenSubtitles 2018 (OPUS)."""
    path = _package_file("spellchecker", "resources", f"{lang}.json.gz")
    try:
        table = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, ValueError) as error:
        raise DatasetError(f"{path} is not a readable word-frequency list: {error}") from None
    if not isinstance(table, dict):
        raise DatasetError(f"{path}: expected an object of word counts")
    pairs = [
        (word, int(count))
        for word, count in table.items()
        if isinstance(word, str) and word and not any(ch.isspace() for ch in word)
        and isinstance(count, int) and count > 0
    ]
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs


def warm_start_list(n: int = 2000) -> list[str]:
    """The ``n`` most frequent words of the warm-start source (see `WARM_START_SOURCE`)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    pairs = warm_start_counts()
    if n > len(pairs):
        raise ValueError(f"n must be at most {len(pairs)} (the source's size), got {n}")
    return [word.lower() for word, _ in pairs[:n]]


# Left-to-right, right-to-left and Arabic letter marks, and the four isolates: none draws
# anything.
_DIRECTION_MARKS = "\u200e\u200f\u061c\u2066\u2067\u2068\u2069"


def listed_item_defect(item: str) -> str | None:
    """Why ``item`` cannot be a line of an item list, or None: it must be an item
    (`fedhh.data.dataset.item_defect`: non-empty, no line break) without whitespace or a
    direction mark at either end (module docstring)."""
    if (defect := item_defect(item)) is not None:
        return defect
    if item[0].isspace() or item[-1].isspace():
        end = "begins" if item[0].isspace() else "ends"
        char = item[0] if end == "begins" else item[-1]
        return (f"{end} with whitespace ({ascii(char)[1:-1]}); an item list's items may hold "
                "spaces inside but not at either end, where no editor shows them")
    if item[0] in _DIRECTION_MARKS or item[-1] in _DIRECTION_MARKS:
        end = "begins" if item[0] in _DIRECTION_MARKS else "ends"
        char = item[0] if end == "begins" else item[-1]
        return (f"{end} with an invisible direction mark ({ascii(char)[1:-1]}), as the "
                "console and the web demo page set around a Hebrew or Arabic item "
                "(fedhh.codec.shown.isolated, page_isolated): copied from there, it names "
                "another item; take the item from --json, or "
                "delete the mark")
    return None


_FORMATS = ('one item a line, or one JSON array of strings in a file named .json (["new york", '
            '" new york"])')


def write_item_list(items: list[str], path: str | os.PathLike[str]) -> Path:
    """Write items atomically in the format `load_item_list` reads for the path's name: one
    JSON array of strings for a ``.json`` file (each item passing
    `fedhh.data.dataset.item_defect`), else one item a line (each passing
    `listed_item_defect`, the first not a JSON user); a ``.jsonl`` name is refused. A first
    item that begins with U+FEFF gets a byte-order mark before it, which `load_item_list`
    drops as an editor's mark, keeping the item's own."""
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix in JSON_LINES_SUFFIXES:
        # (before, written one a line: read back so then, refused since)
        raise DatasetError(f"{out}: an item list is {_FORMATS}, not JSON lines")
    for i, item in enumerate(items):
        defect = item_defect(item) if suffix == ".json" else listed_item_defect(item)
        if defect is None and suffix != ".json" and i == 0 and json_user(item):
            defect = "would read back as JSON on the list's first line; write it to a .json file"
        if defect is not None:
            raise DatasetError(f"{out}: item {i + 1} ({item!r}) {defect}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out, "w") as handle:
        if suffix == ".json":
            # (before, one a line here too: `fedhh data warm-start --out warm.json` wrote a
            # file that --deny-list warm.json refused as not JSON)
            json.dump(items, handle, ensure_ascii=False, indent=0)
            handle.write("\n")
            return out
        if items and items[0].startswith("\ufeff"):
            handle.write("\ufeff")  # (read as a mark: the item's own U+FEFF is kept after it)
        for item in items:
            handle.write(item + "\n")
    return out


def load_item_list(path: str | os.PathLike[str]) -> list[str]:
    """Read an item list: one item per line, UTF-8 (a leading byte-order mark, as some editors
    write, is not part of the first item); a final newline is optional.

    A line holds exactly one item, spaces inside it included (``new york``): an empty line,
    whitespace at either end of it, a line break other than the line's end (``\\v``, U+2028),
    or bytes that are not UTF-8 give a DatasetError naming the file and the line. Repeated items
    are kept once (first occurrence order). A ``.json`` file is one JSON array of item strings
    (`_json_item_list`), for items that begin or end with whitespace; a ``.jsonl`` file, or
    one whose first line is a JSON user (`fedhh.data.text.json_user`), is refused: read one
    item a line, it would deny the JSON's text, not the items it names.
    """
    source = Path(path)
    try:
        raw = read_whole(source, LIST_FILE_BYTES, "item list")
    except OSError as error:
        raise DatasetError(f"cannot read item list {source}: {error.strerror}") from None
    if (problem := wide_encoding_problem(raw)) is not None:
        raise DatasetError(f"{source}: {problem}; an item list is UTF-8: save it so")
    if source.suffix.lower() == ".json":
        return _json_item_list(source, raw)
    if source.suffix.lower() in JSON_LINES_SUFFIXES:
        # (read one item a line, its lines' brackets and quotes were parts of items that no
        # user holds: the list denied nothing, silently)
        raise DatasetError(f"{source}: an item list is {_FORMATS}, not JSON lines")
    lines = raw.removeprefix(codecs.BOM_UTF8).split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    items: dict[str, None] = {}
    for number, line in enumerate(lines, start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            item = line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DatasetError(f"{source}: {not_utf8(error, number)}") from None
        if not item:
            raise DatasetError(f"{source}: line {number} is empty; one item per line expected")
        if number == 1 and json_user(item):
            raise DatasetError(
                f"{source}: line 1 is JSON (an array of strings or an object of counts): read "
                f"as one item a line, it would deny the one item {item[:60]!r}, not the items "
                f"it names; an item list is {_FORMATS}")
        if (defect := listed_item_defect(item)) is not None:
            if item[0].isspace() or item[-1].isspace():
                defect += ("; to name such an item, write the list as one JSON array of strings "
                           'in a .json file (["new york "])')
            raise DatasetError(f"{source}: line {number}: item {item!r} {defect}")
        items.setdefault(item, None)
    return list(items)


def _json_item_list(source: Path, raw: bytes) -> list[str]:
    """An item list written as one JSON array of strings (UTF-8, a leading byte-order mark
    dropped): each string an item exactly as written, spaces at its ends too; an element
    that is not an item (`fedhh.data.dataset.item_defect`: not a string, empty, a line
    break) is a DatasetError naming its position. Repeated items are kept once."""
    try:
        text = raw.removeprefix(codecs.BOM_UTF8).decode("utf-8")
        value = loads(text)
    except UnicodeDecodeError as error:
        raise DatasetError(f"{source}: {not_utf8(error)}") from None
    except json.JSONDecodeError as error:
        if not (error.msg.startswith("Invalid control") and error.pos < len(text)):
            # (before, Python's words, "line 1 column 6 (char 5)": a third position, from 0)
            raise DatasetError(f"{source}: line {error.lineno} column {error.colno}: not JSON "
                               f"({error.msg}); a .json item list is one JSON array of "
                               'strings: ["new york", " new york"]') from None
        # (before, "Invalid control character at", naming no character)
        raise DatasetError(
            f"{source}: line {error.lineno} column {error.colno}: not JSON: "
            f"{raw_control(text[error.pos])} inside a string; JSON holds a control character "
            "only escaped, as json.dumps writes it (\\t, \\u0000)") from None
    except (ValueError, RecursionError) as error:
        raise DatasetError(f"{source}: not JSON ({error}); a .json item list is one JSON "
                           'array of strings: ["new york", " new york"]') from None
    if not isinstance(value, list):
        kind = {dict: "an object", str: "a string", bool: "true or false", type(None): "null"}
        raise DatasetError(f"{source}: a .json item list is one JSON array of strings, not "
                           f"{kind.get(type(value), 'a number')}")
    items: dict[str, None] = {}
    for nth, item in enumerate(value, start=1):
        # (a number told how to be an item, as in JSON lines: before, "element 2 (1e5) is a
        # JSON number, not a string" alone)
        defect = (not_a_string(item, shown_value(item, 80)) if not isinstance(item, str)
                  else item_defect(item))
        if defect is None:
            items.setdefault(item, None)
            continue
        shown = json.dumps(item)[:80] if isinstance(item, str) else shown_value(item, 80)
        raise DatasetError(f"{source}: line {_element_line(text, nth)}: element {nth} "
                           f"({shown}) {defect}")
    return list(items)


def _element_line(text: str, nth: int) -> int:
    """The line (from 1) on which element ``nth`` (from 1) of the JSON array ``text`` begins:
    a list written with indent= has one element a line, which an editor finds by its line.
    (Only for an error: it decodes the elements before it again.)"""
    def past_space(at: int) -> int:
        while at < len(text) and text[at] in " \t\n\r":  # (JSON's whitespace)
            at += 1
        return at

    decoder = json.JSONDecoder()
    at = text.index("[") + 1
    for _ in range(nth - 1):
        at = past_space(decoder.raw_decode(text, past_space(at))[1]) + 1  # (past its comma)
    return text.count("\n", 0, past_space(at)) + 1
