"""Codebooks: prefix-free codes over the pieces of an item's UTF-8 form (single bytes and, in a
token codebook, multi-byte tokens), an end symbol and an escape, as values and as JSON files.

An item's UTF-8 bytes are written as a sequence of *symbols*: a byte or token with its own
codeword is written as that codeword; a byte without one as the escape codeword followed by the
byte's 8 bits; the end symbol follows the last byte. Every byte can be written, so every Unicode
string has a code. Decoding is symbol by symbol, so two different strings never share a code
(they can only share the first ``max_bits`` bits, when both are truncated). A codebook whose
codewords cover all 256 bytes needs no escape.

**Raw continuations** (``raw_continuations``, the ``unicode`` codebook). Every byte after the
first of a multi-byte UTF-8 character is ``10xxxxxx``, so once the first byte is read its six
payload bits are all that is left to say: such a codebook gives continuation bytes no codewords
and writes each as its low six bits. A character without a token then costs its first byte's
codeword and 6 bits per further byte (a Hangul syllable ~28 bits, where three byte codewords
cost ~47), and the first byte's codeword is trained on every character it starts. The code is
still decodable symbol by symbol: after a first byte the reader takes 6 bits per continuation
byte that the first byte announces (RFC 3629, section 3).

**The canonical encoding** (``Codebook.item_bits``). With tokens, a string can be written in
several ways ("the" as one token or as t, h, e); every device must write it the same way, so an
item's code is its *shortest* writing, and among the shortest the one whose first symbol covers
the most bytes, then the same for the rest: with ``cost(i)`` the fewest bits that write bytes
``i..`` and the end symbol, the symbol at ``i`` is the longest one ``s`` with
``bits(s) + cost(i + len(s)) == cost(i)``. Without tokens there is one writing (byte by byte).
A token is one or more whole UTF-8 characters, so tokens never split a character.

Built-in codebooks (``BUILTIN_NAMES``):

- ``unicode`` (the default): ``general``'s training with raw continuations (above) and no
  token for a single character: a character is its first byte's codeword and 6 bits a
  further byte, ~22-29 bits in a script the training barely saw (31-47 in ``general``), and
  the characters of one Unicode block share a prefix (``books/unicode.json``);
- ``general`` (the default before 2026-12; kept under its name so that devices and
  coordinators of either version agree on what it means): a Huffman code over every UTF-8
  byte, about 4,000 multi-byte characters (emoji, CJK, accented letters) and the punctuation
  and digit pieces of URLs, e-mail addresses and numbers (``https://``, ``.com``,
  ``@gmail.com``), trained by ``fedhh.data.tokens`` with English words at 90% of the weight:
  English words cost what they cost with ``english``, every other kind of item a fraction of
  it (``books/general.json``);
- ``tokens``: the same training with word pieces as tokens too (``books/tokens.json``): the
  shortest codes, but words no longer share prefixes letter by letter (docs/codecs.md);
- ``english``: a Huffman code trained on English words (``train_codebook`` over
  pyspellchecker's English word counts, with every printable ASCII character given a codeword);
  shipped as ``books/english.json``. On lower-case a-z words it costs about what the letter code
  costs;
- ``german``: the same training on pyspellchecker's German word counts (``books/german.json``);
- ``bytes``: the plain 9-bit code: ``0`` then the byte's 8 bits, and ``1 00000000`` for the end;
- ``huffman``: the English *letter* code of earlier versions (Lewand's letter frequencies, an end
  symbol weighted by the mean word length 4.7, the old unknown symbol now the escape): identical
  bits for every a-z word;
- ``5bit``: the paper's fixed 5-bit code (a-z = 0-25, end = 26, escape = 27; 28-31 unused):
  identical bits for every a-z word.

JSON form (``Codebook.to_json`` / ``Codebook.from_json``)::

    {"format": "fedhh-codebook", "version": 1, "name": "english", "description": "...",
     "end": "1101", "escape": "0111011101", "bytes": {"e": "000", "0xc3": "0110010", ...}}

Codewords are strings of 0 and 1 (at most 48 bits); a byte key is the character itself for
printable ASCII (0x20-0x7e) and ``0xNN`` for any byte. ``"raw_continuations": true`` (absent
otherwise) writes continuation bytes raw; such a book has no codewords for 0x80-0xbf. A token
codebook is version 2 and adds ``"tokens": {"the": "0110", "https://": "10011", ...}`` (each key
the token's text: at least two bytes of whole UTF-8 characters). Loading checks everything:
unknown keys, a byte or token named twice, codewords that are not prefix-free, a missing escape
when some byte has no codeword.
"""

from __future__ import annotations

import builtins
import hashlib
import heapq
import itertools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from fedhh.errors import ConfigError
from fedhh.input_files import (
    LIST_FILE_BYTES,
    missing_reason,
    not_utf8,
    read_whole,
    wide_encoding_problem,
)

FORMAT = "fedhh-codebook"
VERSION = 1          # byte codebooks
TOKENS_VERSION = 2   # codebooks with multi-byte tokens
MAX_CODEWORD_BITS = 48  # an escaped byte (escape + 8 bits) fits a 64-bit chunk
MAX_TOKEN_BYTES = 64
ESCAPE_PAYLOAD_BITS = 8
CONTINUATION_BYTES = range(0x80, 0xC0)  # 10xxxxxx: the second to fourth bytes of a character
CONTINUATION_PAYLOAD_BITS = 6           # what a raw continuation byte is written as
DEFAULT_CODEBOOK = "unicode"
BUILTIN_NAMES = ("unicode", "general", "tokens", "english", "german", "bytes", "huffman", "5bit")
TRAINED_BOOKS = ("unicode", "general", "tokens", "english", "german")  # books/<name>.json
PRINTABLE_ASCII = tuple(range(0x20, 0x7F))
FLOOR_SHARE = 1e-4  # training: every floor byte and the escape get at least this share

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_CODEWORD = re.compile(r"^[01]{1,48}$")
_HEX_KEY = re.compile(r"^0x[0-9a-f]{2}$")

# Lewand (2000), percent of letters in English text: the letter code of earlier versions.
LETTER_FREQUENCIES: dict[str, float] = {
    "a": 8.167, "b": 1.492, "c": 2.782, "d": 4.253, "e": 12.702, "f": 2.228, "g": 2.015,
    "h": 6.094, "i": 6.966, "j": 0.153, "k": 0.772, "l": 4.025, "m": 2.406, "n": 6.749,
    "o": 7.507, "p": 1.929, "q": 0.095, "r": 5.987, "s": 6.327, "t": 9.056, "u": 2.758,
    "v": 0.978, "w": 2.360, "x": 0.150, "y": 1.974, "z": 0.074,
}  # fmt: skip
MEAN_WORD_LENGTH = 4.7
UNKNOWN_WEIGHT = 0.5


@dataclass(frozen=True)
class Codebook:
    """A prefix-free code: codewords (bit strings) for the end symbol, the escape (None when
    every byte has a codeword), some bytes and, in a token codebook, multi-byte tokens."""

    name: str
    end: str
    escape: str | None
    bytes: Mapping[int, str]
    description: str = ""
    tokens: Mapping[builtins.bytes, str] = field(default_factory=dict)
    raw_continuations: bool = False
    _canonical: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bytes", dict(sorted(self.bytes.items())))
        object.__setattr__(self, "tokens", dict(sorted(self.tokens.items())))
        _validate(self)
        object.__setattr__(self, "_canonical", json.dumps(self.to_dict(), sort_keys=True,
                                                          separators=(",", ":"),
                                                          ensure_ascii=False))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Codebook) and self._canonical == other._canonical

    def __hash__(self) -> int:
        return hash(self._canonical)

    # ---- identity and JSON -------------------------------------------------------------------
    @property
    def builtin(self) -> bool:
        return self.name in BUILTIN_NAMES and builtin_codebook(self.name) == self

    @property
    def spec(self) -> str:
        """What a run configuration carries: the name of a built-in codebook, else the
        codebook's canonical JSON (so a device rebuilds exactly this code)."""
        return self.name if self.builtin else self._canonical

    @property
    def key(self) -> str:
        """A short identity for caches and file names: the name and a digest of the content,
        so that a retrained built-in codebook never reads what an earlier version cached."""
        digest = hashlib.sha256(self._canonical.encode()).hexdigest()[:12]
        return f"{self.name}-{digest}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": FORMAT, "version": TOKENS_VERSION if self.tokens else VERSION,
            "name": self.name, "description": self.description, "end": self.end,
            "escape": self.escape,
            "bytes": {_byte_key(b): code for b, code in self.bytes.items()}}
        if self.raw_continuations:  # absent when false: older books keep their JSON and key
            data["raw_continuations"] = True
        if self.tokens:
            data["tokens"] = {token.decode("utf-8"): code for token, code in self.tokens.items()}
        return data

    def to_json(self) -> str:
        """Readable JSON (one byte or token per line), the form of a codebook file."""
        data = self.to_dict()
        tables = [(key, data.pop(key)) for key in ("bytes", "tokens") if key in data]
        head = json.dumps(data, ensure_ascii=False, indent=2)[:-2]
        parts = []
        for key, table in tables:
            body = ",\n".join(f"    {json.dumps(k, ensure_ascii=False)}: {json.dumps(v)}"
                              for k, v in table.items())
            parts.append(f'  "{key}": {{\n{body}\n  }}')
        return head + ",\n" + ",\n".join(parts) + "\n}\n"

    @staticmethod
    def from_dict(data: Any, where: str = "codebook") -> Codebook:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: a codebook is a JSON object, got {type(data).__name__}")
        known = {"format", "version", "name", "description", "end", "escape", "bytes", "tokens",
                 "raw_continuations"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown codebook keys {', '.join(unknown)}")
        version = data.get("version")
        if data.get("format") != FORMAT or version not in (VERSION, TOKENS_VERSION):
            raise ConfigError(f"{where}: not a {FORMAT} version {VERSION} or {TOKENS_VERSION} "
                              f"codebook (format {data.get('format')!r}, version {version!r})")
        if ("tokens" in data) != (version == TOKENS_VERSION):
            raise ConfigError(f"{where}: a codebook has 'tokens' exactly when it is version "
                              f"{TOKENS_VERSION}")
        table = data.get("bytes", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: 'bytes' must be an object of byte -> codeword")
        parsed: dict[int, str] = {}
        for key, code in table.items():
            value = _parse_byte_key(key, where)
            if value in parsed:
                raise ConfigError(f"{where}: byte {_byte_key(value)} has two codewords")
            parsed[value] = code
        for name in ("name", "end"):
            if not isinstance(data.get(name), str):
                raise ConfigError(f"{where}: {name!r} must be a string")
        escape = data.get("escape")
        if escape is not None and not isinstance(escape, str):
            raise ConfigError(f"{where}: 'escape' must be a codeword string or null")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise ConfigError(f"{where}: 'description' must be a string")
        tokens_table = data.get("tokens", {})
        if not isinstance(tokens_table, dict):
            raise ConfigError(f"{where}: 'tokens' must be an object of token text -> codeword")
        tokens = {_utf8(key): code for key, code in tokens_table.items()}
        raw = data.get("raw_continuations", False)
        if not isinstance(raw, bool):
            raise ConfigError(f"{where}: 'raw_continuations' must be true or false")
        try:
            return Codebook(data["name"], data["end"], escape, parsed, description, tokens, raw)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None

    @staticmethod
    def from_json(text: str, where: str = "codebook") -> Codebook:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ConfigError(f"{where}: not valid JSON: {error}") from None
        except RecursionError:  # json recurses once per nested array or object
            raise ConfigError(f"{where}: not a codebook: JSON nested too deeply") from None
        return Codebook.from_dict(data, where)

    # ---- properties of the code --------------------------------------------------------------
    @property
    def max_codeword(self) -> int:
        return max(len(c) for c in self.codewords())

    def codewords(self) -> list[str]:
        return [self.end, *([self.escape] if self.escape is not None else []),
                *self.bytes.values(), *self.tokens.values()]

    @property
    def max_token_bytes(self) -> int:
        """The most bytes one symbol writes (1 without tokens)."""
        return max((len(t) for t in self.tokens), default=1)

    def byte_bits(self, value: int) -> str:
        """The bits that write one byte: its codeword, or the escape and the byte, or (with
        raw continuations) a continuation byte's low six bits."""
        if self.raw_continuations and value in CONTINUATION_BYTES:
            return format(value & 0x3F, f"0{CONTINUATION_PAYLOAD_BITS}b")
        code = self.bytes.get(value)
        if code is not None:
            return code
        return f"{self.escape}{value:08b}"  # _validate: a byte without a codeword has the escape

    def symbols_of(self, data: builtins.bytes) -> list[builtins.bytes]:
        """The canonical writing of ``data`` (module docstring): its symbols in order (single
        bytes and tokens). The slow, plain reference; ``fedhh.codec.codec`` encodes fast."""
        n = len(data)
        cost = [0] * (n + 1)
        choice = [1] * (n + 1)
        for i in range(n - 1, -1, -1):
            best, length = len(self.byte_bits(data[i])) + cost[i + 1], 1
            for size in range(2, min(self.max_token_bytes, n - i) + 1):
                code = self.tokens.get(data[i : i + size])
                if code is not None and len(code) + cost[i + size] <= best:
                    best, length = len(code) + cost[i + size], size
            cost[i], choice[i] = best, length
        out, i = [], 0
        while i < n:
            out.append(data[i : i + choice[i]])
            i += choice[i]
        return out

    def symbol_bits(self, symbol: builtins.bytes) -> str:
        """The bits that write one symbol of a writing: a token's codeword or a byte's bits."""
        if len(symbol) == 1:
            return self.byte_bits(symbol[0])
        return self.tokens[symbol]

    def item_bits(self, item: str) -> str:
        """An item's whole code as a bit string (the slow reference of the fast encoder)."""
        return "".join(self.symbol_bits(s) for s in self.symbols_of(_utf8(item))) + self.end


def _byte_key(value: int) -> str:
    return chr(value) if 0x20 <= value < 0x7F else f"0x{value:02x}"


def _parse_byte_key(key: Any, where: str) -> int:
    if isinstance(key, str) and len(key) == 1 and 0x20 <= ord(key) < 0x7F:
        return ord(key)
    if isinstance(key, str) and _HEX_KEY.fullmatch(key):
        return int(key, 16)
    raise ConfigError(f"{where}: byte key {key!r} is neither a printable ASCII character nor "
                      "0xNN (two lower-case hex digits)")


def _validate(book: Codebook) -> None:
    if not _NAME.fullmatch(book.name):
        raise ConfigError(f"codebook name {book.name!r} must be 1-64 letters, digits, '_', '.' "
                          "or '-', starting with a letter or digit")
    labelled = [("end", book.end)]
    if book.escape is not None:
        labelled.append(("escape", book.escape))
    for value, code in book.bytes.items():
        if not (isinstance(value, int) and 0 <= value <= 255):
            raise ConfigError(f"codebook byte {value!r} is not in 0..255")
        labelled.append((f"byte {_byte_key(value)}", code))
    for token, code in book.tokens.items():
        if not isinstance(token, bytes) or not 2 <= len(token) <= MAX_TOKEN_BYTES:
            raise ConfigError(f"codebook token {token!r} must be 2 to {MAX_TOKEN_BYTES} bytes")
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"codebook token {token!r} is not whole UTF-8 characters") from None
        labelled.append((f"token {token.decode('utf-8')!r}", code))
    for label, code in labelled:
        if not isinstance(code, str) or not _CODEWORD.fullmatch(code):
            raise ConfigError(f"codeword of {label} must be 1 to {MAX_CODEWORD_BITS} characters "
                              f"0 or 1, got {code!r}")
    # Prefix-free: after sorting, a codeword that is a prefix of another sorts right before one
    # of the codewords it prefixes.
    ordered = sorted(labelled, key=lambda pair: pair[1])
    for (label_a, a), (label_b, b) in itertools.pairwise(ordered):
        if b.startswith(a):
            raise ConfigError(f"codewords are not prefix-free: {label_a} ({a}) is a prefix of "
                              f"{label_b} ({b})")
    coded = 256
    if book.raw_continuations:
        given = sorted(_byte_key(b) for b in book.bytes if b in CONTINUATION_BYTES)
        if given:
            raise ConfigError(f"codebook {book.name!r} writes continuation bytes raw and also "
                              f"gives codewords to {', '.join(given[:4])}")
        coded -= len(CONTINUATION_BYTES)
    if book.escape is None and len(book.bytes) < coded:
        raise ConfigError(f"codebook {book.name!r} has codewords for {len(book.bytes)} of "
                          f"{coded} bytes and no escape, so some strings cannot be encoded")
    if book.escape is not None and len(book.bytes) == coded:
        raise ConfigError(f"codebook {book.name!r} has a codeword for every byte and an escape "
                          "that could never be used validly")


# ---- training ----------------------------------------------------------------------------------
def huffman_codewords(weights: list[float]) -> list[str]:
    """Huffman codewords for symbols 0..k-1 with the given weights (k >= 2).

    Ties are broken by insertion order (a heap of (weight, counter, symbols)), so the code is a
    deterministic function of the weights and their order; the merged group's left branch is 0.
    """
    if len(weights) < 2:
        raise ConfigError("a Huffman code needs at least two symbols")
    if any(not w > 0 for w in weights):
        raise ConfigError("Huffman weights must be positive")
    counter = itertools.count()
    heap: list[tuple[float, int, tuple[int, ...]]] = [
        (w, next(counter), (s,)) for s, w in enumerate(weights)
    ]
    heapq.heapify(heap)
    codes = [""] * len(weights)
    while len(heap) > 1:
        w0, _, left = heapq.heappop(heap)
        w1, _, right = heapq.heappop(heap)
        for bit, group in (("0", left), ("1", right)):
            for s in group:
                codes[s] = bit + codes[s]
        heapq.heappush(heap, (w0 + w1, next(counter), left + right))
    return codes


def train_codebook(
    samples: Iterable[tuple[str, float]],
    name: str,
    *,
    description: str = "",
    floor_bytes: Iterable[int] = PRINTABLE_ASCII,
    floor_share: float = FLOOR_SHARE,
) -> Codebook:
    """A Huffman codebook fitted to a public sample of the item domain.

    ``samples`` are (item, weight) pairs, e.g. a word list with its counts, or a list of
    domains with weight 1 each. Byte weights are summed over the items' UTF-8 bytes and the end
    symbol weighs the total item weight. Every byte of ``floor_bytes`` (printable ASCII by
    default), and the escape, get at least ``floor_share`` of the total weight; bytes below that
    share have no codeword and are written through the escape. The code is then Huffman's
    over (end, escape, the bytes kept, in byte order).
    """
    if not 0 < floor_share < 0.01:
        raise ConfigError(f"floor_share must be in (0, 0.01), got {floor_share}")
    weights = [0.0] * 256
    items = 0.0
    for item, weight in samples:
        if not weight > 0:
            raise ConfigError(f"sample weights must be positive, got {weight!r} for {item!r}")
        data = _utf8(item)
        items += weight
        for value in data:
            weights[value] += weight
    if not items > 0:
        raise ConfigError("train_codebook needs at least one sample")
    total = items + sum(weights)
    floor = floor_share * total
    for value in floor_bytes:
        weights[value] = max(weights[value], floor)
    kept = [b for b in range(256) if weights[b] >= floor]
    escaped = sum(w for b, w in enumerate(weights) if b not in set(kept))
    symbols: list[float] = [items, max(escaped, floor)] if len(kept) < 256 else [items]
    symbols += [weights[b] for b in kept]
    codes = huffman_codewords(symbols)
    if max(len(c) for c in codes) > MAX_CODEWORD_BITS:
        raise ConfigError(f"the trained code has codewords longer than {MAX_CODEWORD_BITS} "
                          "bits; raise floor_share")
    end, rest = codes[0], codes[1:]
    escape = None
    if len(kept) < 256:
        escape, rest = rest[0], rest[1:]
    return Codebook(name, end, escape, dict(zip(kept, rest, strict=True)), description)


def _utf8(item: str) -> bytes:
    try:
        return item.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"item {item!r} is not valid Unicode (a lone surrogate?)") from None


# ---- built-in codebooks --------------------------------------------------------------------------
def letter_codebook() -> Codebook:
    """The English letter code of earlier versions (same tree, same bits for a-z words)."""
    weights = [*LETTER_FREQUENCIES.values(), 100.0 / MEAN_WORD_LENGTH, UNKNOWN_WEIGHT]
    codes = huffman_codewords(weights)
    letters = {ord(c): codes[i] for i, c in enumerate(LETTER_FREQUENCIES)}
    return Codebook("huffman", codes[26], codes[27], letters,
                    "English letter frequencies (Lewand 2000); other bytes escaped")


def fixed5_codebook() -> Codebook:
    """The paper's 5-bit code: a-z = 0..25, end = 26, escape = 27 (28-31 unused)."""
    letters = {ord("a") + i: format(i, "05b") for i in range(26)}
    return Codebook("5bit", format(26, "05b"), format(27, "05b"), letters,
                    "the paper's fixed 5-bit code; other bytes escaped")


def bytes_codebook() -> Codebook:
    """9 bits per byte: 0 and the byte; the end symbol is 1 followed by eight 0s."""
    return Codebook("bytes", "1" + "0" * 8, None, {b: "0" + format(b, "08b") for b in range(256)},
                    "plain UTF-8 bytes, 9 bits each")


@cache
def builtin_codebook(name: str) -> Codebook:
    if name == "huffman":
        return letter_codebook()
    if name == "5bit":
        return fixed5_codebook()
    if name == "bytes":
        return bytes_codebook()
    if name in TRAINED_BOOKS:
        text = resources.files("fedhh.codec").joinpath("books", f"{name}.json").read_text(
            encoding="utf-8")
        return Codebook.from_json(text, f"built-in codebook {name}")
    raise ConfigError(f"unknown codebook {name!r}; built-in codebooks: "
                      f"{', '.join(BUILTIN_NAMES)}, or give a codebook's JSON")


def codebook_from_spec(spec: str) -> Codebook:
    """The codebook a run configuration names: a built-in name or a codebook's inline JSON."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"a codec is a built-in codebook name ({', '.join(BUILTIN_NAMES)}) "
                          f"or a codebook's JSON, got {spec!r}")
    text = spec.strip()
    if text.startswith("{"):
        return Codebook.from_json(text, "inline codebook")
    return builtin_codebook(text)


def _looks_like_path(text: str) -> bool:
    """Whether a ``--codec`` value is written as a file's path rather than a codebook's name."""
    return "/" in text or os.sep in text or text.lower().endswith(".json")


def codec_spec(value: str) -> str:
    """The codec spec of a command-line value: a built-in name, a codebook JSON file, or inline
    JSON; a file or inline JSON becomes the codebook's canonical JSON (what a run configuration
    carries, so the coordinator and the devices never read the operator's files)."""
    text = value.strip()
    if text in BUILTIN_NAMES:
        return text
    if text.startswith("{"):
        return Codebook.from_json(text, "inline codebook").spec
    path = Path(text)
    if path.is_dir():
        raise ConfigError(f"codebook file {path} is a folder; give the codebook JSON file")
    # (a named pipe is read as the item lists read one: `--codec <(zcat book.json.gz)`)
    if not path.is_file() and not path.is_fifo():
        # (said of what a name looks like, not a path: "englsh"; before, a link loop, a link to
        # a moved file and a folder in the path that is a file were said to be no file too)
        reason = missing_reason(path)
        if reason == "does not exist" and not _looks_like_path(text):
            raise ConfigError(f"codebook {value!r} is neither a built-in codebook "
                              f"({', '.join(BUILTIN_NAMES)}) nor a codebook JSON file")
        raise ConfigError(f"codebook file {path} {reason}")
    try:
        raw = read_whole(path, LIST_FILE_BYTES, "codebook file")
    except OSError as error:
        raise ConfigError(f"cannot read codebook file {path}: {error}") from None
    if (problem := wide_encoding_problem(raw)) is not None:
        raise ConfigError(f"codebook file {path}: {problem}; a codebook is UTF-8: save it so")
    try:
        # (a leading byte-order mark, as an editor saves one, dropped as the item and dataset
        # readers drop it: before, "not valid JSON: Unexpected UTF-8 BOM (decode using
        # utf-8-sig)")
        content = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(f"codebook file {path}: {not_utf8(error)}") from None
    return Codebook.from_json(content, str(path)).spec
