"""``Codec``: items to codes of ``max_bits`` bits with a codebook, and prefixes back to text.

An item's code is its codebook bits (``fedhh.codec.codebook``) left-aligned in ``max_bits`` bits
and zero padded, or its first ``max_bits`` bits when longer (the item is then *truncated*: it
stands for every item sharing those bits, and is shown as ``text…`` and flagged). The length-L
prefix of a code is ``code >> (max_bits - L)``; arrays of codes are described in
``fedhh.codec.codes`` (uint64 up to 64 bits, wider ones as big-endian words).

Decoding never drops or swallows a bit: every bit of a prefix is part of a shown character,
of a shown impossible part (``⟨bits⟩`` for an unused codeword, an invalid escape or nonzero
padding, ``⟨0xNN⟩`` for a byte that is not UTF-8), of the padding after the end symbol, or of
the trailing bits of a codeword or character the prefix stops inside (``trailing_bits``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from fedhh.codec import codes as cw
from fedhh.codec.automaton import DEAD, ENDED, Automaton, CodeTree, continuations
from fedhh.codec.codebook import (
    CONTINUATION_PAYLOAD_BITS,
    DEFAULT_CODEBOOK,
    Codebook,
    codebook_from_spec,
)
from fedhh.codec.shown import cut_text
from fedhh.errors import ConfigError

MAX_SUPPORTED_BITS = 4096
ENCODE_BATCH = 1 << 17
ELLIPSIS = "…"
OPEN_BRACKET = "⟨"  # (how open_marker begins)


@dataclass(frozen=True)
class Decoded:
    """A prefix decoded to text.

    ``ended``: the end symbol was read. ``possible``: some honest device's code starts with
    these bits (exact, from the code's automaton); when not, ``problem`` says why.
    ``trailing_bits``: bits after the last whole character (the prefix stops inside a codeword,
    an escape or a multi-byte character).
    """

    text: str
    ended: bool
    possible: bool
    trailing_bits: int
    problem: str = ""
    partial: bytes = b""  # the bytes of a character the prefix stops inside
    open_bits: int = 0  # bits of a codeword the prefix stops inside, after its last whole byte
    # A token could run across its end (``Codec.decode``): it shows ``⟨+0 bits⟩`` when cut.
    token_across: bool = False

    @property
    def known_bytes(self) -> int:
        """How many of an item's first bytes the prefix holds: its whole characters' UTF-8
        bytes and those of a character it stops inside (``partial``). A cut item is shown by
        them alone: what follows, its end too, is no part of what was found."""
        return len(self.text.encode("utf-8", "surrogatepass")) + len(self.partial)

    @property
    def shown_cut(self) -> str:
        """The prefix as a cut item is shown: its whole characters, their backslashes doubled
        (so that ``\\xNN`` always means a byte), then the bytes of a character it stops inside
        as ``\\xNN``, then how many bits of a further byte's codeword it holds (``⟨+3 bits⟩``,
        `open_marker`; an ``⟨`` of its own shown ``\\u27e8``), then ``…``; a prefix without a
        whole byte shows its bits (``⟨0110⟩…``), never a bare ``…``.
        ``fedhh.codec.shown.printable(..., cut=True)`` escapes the rest.

        The count keeps apart prefixes that would read as parent and child and are not: ``ab``
        and 3 bits of a codeword that is not ``c``'s, shown ``ab…``, read as the parent of
        ``abc…`` (every item starting ``ab``), though no item under it starts ``abc``; it
        shows ``ab⟨+3 bits⟩…``, and a shown text that begins another's (less its ``…``)
        stands for bits that begin the other's. With tokens a text can be written two ways:
        a prefix that ends on a whole codeword where a token could have run on across its end
        (``token_across``: ``+1-5`` through a lone ``5``, where ``55`` is a token) holds no
        item written with that token (``+1-55…``), so it shows ``⟨+0 bits⟩`` of the next
        codeword (``+1-5⟨+0 bits⟩…``), and its text is not read as the other's parent."""
        escaped = "".join(f"\\x{b:02x}" for b in self.partial)
        marker = open_marker(self.open_bits, self.token_across and not self.partial)
        return cut_text(self.text) + escaped + marker + ELLIPSIS


def open_marker(bits: int, token_across: bool = False) -> str:
    """How a cut prefix shows the bits it holds of a codeword it stops inside (``⟨+1 bit⟩``,
    ``⟨+3 bits⟩``); for none, ``⟨+0 bits⟩`` where a token could have run across its end
    (``Decoded.shown_cut``), else nothing."""
    if bits <= 0:
        return f"{OPEN_BRACKET}+0 bits⟩" if token_across else ""
    return f"{OPEN_BRACKET}+{bits} bit{'' if bits == 1 else 's'}⟩"


@dataclass(frozen=True)
class ItemCodes:
    """Encoded items: codes (see ``fedhh.codec.codes``), their bit lengths (up to and including
    the end symbol, or ``max_bits`` when truncated) and which were truncated."""

    codes: np.ndarray
    lengths: np.ndarray
    truncated: np.ndarray


@lru_cache(maxsize=64)
def _automaton(book: Codebook) -> Automaton:
    return Automaton(book)


class Codec:
    """Encodes items with a codebook into ``max_bits``-bit codes and decodes prefixes."""

    def __init__(self, spec: str | Codebook = DEFAULT_CODEBOOK, max_bits: int = 60) -> None:
        book = spec if isinstance(spec, Codebook) else codebook_from_spec(spec)
        if isinstance(max_bits, bool) or not isinstance(max_bits, int) \
                or not 1 <= max_bits <= MAX_SUPPORTED_BITS:
            raise ConfigError(f"max_bits must be an integer in [1, {MAX_SUPPORTED_BITS}], got "
                              f"{max_bits!r}")
        self.book = book
        self.max_bits = max_bits
        self._trie = _token_trie(book) if book.tokens else None
        values = np.zeros(256, dtype=np.uint64)
        lengths = np.zeros(256, dtype=np.int64)
        for b in range(256):
            bits = book.byte_bits(b)
            values[b], lengths[b] = int(bits, 2), len(bits)
        self._byte_values, self._byte_lengths = values, lengths
        self._end_value, self._end_length = np.uint64(int(book.end, 2)), len(book.end)

    @staticmethod
    @lru_cache(maxsize=64)
    def from_spec(spec: str, max_bits: int = 60) -> Codec:
        """The codec a run configuration names (a built-in codebook name or a codebook's
        inline JSON), cached: devices build one per task."""
        return Codec(spec, max_bits)

    @property
    def name(self) -> str:
        return self.book.name

    @property
    def spec(self) -> str:
        """The codebook as a run configuration carries it (``Codec.from_spec`` inverts it)."""
        return self.book.spec

    @property
    def key(self) -> str:
        """Identity of (codebook, max_bits) for caches and file names."""
        return f"{self.book.key}_{self.max_bits}"

    @cached_property
    def automaton(self) -> Automaton:
        return _automaton(self.book)

    def __repr__(self) -> str:
        return f"Codec({self.name!r}, max_bits={self.max_bits})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Codec) and (self.book, self.max_bits) == \
            (other.book, other.max_bits)

    def __hash__(self) -> int:
        return hash((self.book.key, self.max_bits))

    # ---- encoding ------------------------------------------------------------------------------
    def encode(self, item: str) -> int:
        """The code of one item, as an integer."""
        return cw.to_ints(self.encode_many([item]).codes)[0]

    def encode_many(self, items: list[str] | tuple[str, ...]) -> ItemCodes:
        """Encode many items at once.

        Every symbol of an item's writing (a byte's codeword or the escape and the byte; with
        tokens, the canonical writing of ``Codebook.symbols_of``) becomes one chunk of bits, and
        the end symbol one more; chunk positions are cumulative sums, and each chunk is ORed
        into the one or two 64-bit words it falls in. Byte codebooks are vectorized over the
        bytes; token codebooks find each item's writing with a dynamic program over a trie.
        """
        r = self.max_bits
        count = len(items)
        if count == 0:
            return ItemCodes(cw.empty(r), np.zeros(0, np.int64), np.zeros(0, bool))
        if count > ENCODE_BATCH and r > cw.WORD_BITS:
            # Wide codes keep several arrays per byte: bound their memory by batching.
            parts = [self.encode_many(items[i : i + ENCODE_BATCH])
                     for i in range(0, count, ENCODE_BATCH)]
            return ItemCodes(*(np.concatenate([getattr(p, f) for p in parts])
                               for f in ("codes", "lengths", "truncated")))
        encoded = _utf8_all(items)
        sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=count)
        if not sizes.all():
            raise ConfigError(f"item {int(np.argmin(sizes))} is empty; items must be non-empty")
        if self._trie is None:
            # Every codeword is a bit at least, so the bytes past the first max_bits + 1 reach
            # no bit of the code, and those kept still mark the item cut: only they are
            # written (a vocabulary of long URLs held 60 bytes of arrays for each of its bytes).
            if int(sizes.max()) > r + 1:
                encoded = [data[:r + 1] for data in encoded]
                sizes = np.minimum(sizes, r + 1)
            values, lengths, chunks = self._byte_chunks(encoded, sizes)
        else:
            values, lengths, chunks = self._token_chunks(encoded)
        return self._pack(values, lengths, chunks)

    def _byte_chunks(self, encoded: list[bytes], sizes: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, length) of every chunk, items one after the other, and chunks per item."""
        count = sizes.size
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        ends = np.cumsum(sizes) + np.arange(count)  # stream position of each end symbol
        lengths = np.empty(data.size + count, dtype=np.int64)
        values = np.empty(data.size + count, dtype=np.uint64)
        is_byte = np.ones(lengths.size, dtype=bool)
        is_byte[ends] = False
        lengths[is_byte] = self._byte_lengths[data]
        values[is_byte] = self._byte_values[data]
        lengths[ends] = self._end_length
        values[ends] = self._end_value
        return values, lengths, sizes + 1

    def _token_chunks(self, encoded: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As ``_byte_chunks``, for a token codebook (the canonical writing of each item)."""
        assert self._trie is not None
        byte_values = self._byte_values.tolist()
        byte_lengths = self._byte_lengths.tolist()
        end_value, end_length = int(self._end_value), self._end_length
        r = self.max_bits
        root = self._trie
        values: list[int] = []
        lengths: list[int] = []
        chunks: list[int] = []
        for data in encoded:
            n = len(data)
            cost = [0] * (n + 1)
            pick_length = [1] * n
            pick_value = [0] * n
            pick_bits = [0] * n
            for i in range(n - 1, -1, -1):
                byte = data[i]
                bits = byte_lengths[byte]
                best, size, value = bits + cost[i + 1], 1, byte_values[byte]
                node = root.get(byte)
                j = i + 1
                while node is not None and j < n:
                    node = node[0].get(data[j])
                    j += 1
                    if node is not None and node[1] and node[1] + cost[j] <= best:
                        best, size, value, bits = node[1] + cost[j], j - i, node[2], node[1]
                cost[i] = best
                pick_length[i], pick_value[i], pick_bits[i] = size, value, bits
            # (the writing is the whole item's, but only its symbols up to the code's width
            # are kept: the rest reach no bit of it, and the end symbol after them still marks
            # the item cut)
            i = written = 0
            before = len(values)
            while i < n and written < r:
                values.append(pick_value[i])
                lengths.append(pick_bits[i])
                written += pick_bits[i]
                i += pick_length[i]
            values.append(end_value)
            lengths.append(end_length)
            chunks.append(len(values) - before)
        return (np.array(values, dtype=np.uint64), np.array(lengths, dtype=np.int64),
                np.array(chunks, dtype=np.int64))

    def _pack(self, values: np.ndarray, lengths: np.ndarray, chunks: np.ndarray) -> ItemCodes:
        """Codes of items given as chunks (``_byte_chunks``), cut at ``max_bits``."""
        r = self.max_bits
        ends = np.cumsum(chunks) - 1  # chunk index of each end symbol
        first = ends - chunks + 1     # chunk index of each item's first chunk
        start = np.cumsum(lengths) - lengths
        start -= np.repeat(start[first], chunks)
        stop = start + lengths
        total = stop[ends]
        cut = stop > r
        values[cut] >>= np.minimum(stop[cut] - r, 63).astype(np.uint64)
        values[start >= r] = 0
        np.minimum(stop, r, out=stop)
        width = cw.words_for(r)
        if width == 1:
            shifted = values << (r - stop).astype(np.uint64)
            codes = np.bitwise_or.reduceat(shifted, first)
        else:
            codes = self._place_words(values, start, stop, chunks, width)
        return ItemCodes(codes, np.minimum(total, r), total > r)

    def _place_words(self, values: np.ndarray, start: np.ndarray, stop: np.ndarray,
                     chunks: np.ndarray, width: int) -> np.ndarray:
        """Codes of several words: each chunk goes to the word of its first bit and, when it
        crosses a word boundary, the rest to the next word."""
        live = start < stop
        values, start, stop = values[live], start[live], stop[live]
        item = np.repeat(np.arange(chunks.size), chunks)[live]
        pad = width * cw.WORD_BITS - self.max_bits
        word, offset = np.divmod(start + pad, cw.WORD_BITS)
        end = offset + (stop - start)
        words = np.zeros(chunks.size * width, dtype=np.uint64)
        inside = end <= cw.WORD_BITS
        target = item * width + word
        np.bitwise_or.at(words, target[inside],
                         values[inside] << (cw.WORD_BITS - end[inside]).astype(np.uint64))
        across = ~inside
        spill = (end[across] - cw.WORD_BITS).astype(np.uint64)
        np.bitwise_or.at(words, target[across], values[across] >> spill)
        np.bitwise_or.at(words, target[across] + 1,
                         values[across] << (np.uint64(cw.WORD_BITS) - spill))
        return cw.from_words(words.reshape(chunks.size, width), self.max_bits)

    # ---- prefixes ------------------------------------------------------------------------------
    def prefix(self, code: int, length: int) -> int:
        """The first ``length`` bits of a code, as a ``length``-bit integer."""
        return code >> (self.max_bits - length)

    def states(self, values: np.ndarray, bits: int) -> np.ndarray:
        """The automaton state after each ``bits``-bit value (DEAD: impossible)."""
        return self.automaton.run(values, bits)

    def possible(self, prefix: int, length: int) -> bool:
        state = self.automaton.run(cw.from_ints([prefix], length), length)[0]
        return int(state) != DEAD

    def ended(self, prefix: int, length: int) -> bool:
        return int(self.automaton.run(cw.from_ints([prefix], length), length)[0]) == ENDED

    def decode(self, prefix: int, length: int) -> Decoded:
        """Decode the first ``length`` bits held in ``prefix`` (a ``length``-bit integer)."""
        if not 0 <= length <= self.max_bits:
            raise ConfigError(f"prefix length must be in [0, {self.max_bits}], got {length}")
        if prefix < 0 or prefix >> length:
            raise ConfigError(f"prefix {prefix} does not fit in {length} bits")
        reader = _Reader(self.book, self.automaton.tree,
                         format(prefix, f"0{length}b") if length else "")
        reader.read()
        possible = self.possible(prefix, length)
        problem = reader.problem
        if not possible and not problem:
            problem = "no code continues these bits (every completion is an invalid escape " \
                      "or not UTF-8)"
        text = reader.text()
        across = (not reader.ended and not reader.open_bits and not reader.partial
                  and self._token_across(reader.last_bytes()))
        return Decoded(text, reader.ended, possible, reader.trailing_bits,
                       "" if possible else problem, reader.partial, reader.open_bits, across)

    @cached_property
    def _max_token_bytes(self) -> int:
        return self.book.max_token_bytes

    def _token_across(self, data: bytes) -> bool:
        """Whether a prefix whose whole symbols end with the bytes ``data`` could be written
        otherwise by a token that runs on past them: some ending of ``data`` begins a longer
        token (``5`` of ``55``, ``20`` of ``2017``, ``.`` of ``.com/``). Then an item written
        with that token (``+1-55…``) has bits that do not begin the prefix's, though its text
        begins the prefix's text (``Decoded.shown_cut``). Never for a codebook without
        tokens, whose writing is one."""
        node = self._trie
        if node is None or not data:
            return False
        for start in range(max(0, len(data) - self._max_token_bytes + 1), len(data)):
            children = node
            for byte in data[start:]:
                found = children.get(byte)
                if found is None:
                    break
                children = found[0]
            else:
                if children:
                    return True
        return False

    def display(self, prefix: int, length: int) -> str:
        """Text of a prefix: exact for an ended item; anything else (an unfinished prefix, an
        item truncated at max_bits) is shown cut (``Decoded.shown_cut``)."""
        decoded = self.decode(prefix, length)
        if decoded.ended:
            return decoded.text
        if not decoded.text and not decoded.partial:
            bits = format(prefix, f"0{length}b") if length else ""
            return f"⟨{bits}⟩{ELLIPSIS}"
        return decoded.shown_cut

    def display_item(self, code: int) -> str:
        return self.display(code, self.max_bits)


TrieNode = tuple[dict[int, "TrieNode"], int, int]  # (children, codeword bits or 0, codeword)


@lru_cache(maxsize=16)
def _token_trie(book: Codebook) -> dict[int, TrieNode]:
    """The tokens by their bytes: first byte -> (children, 0, 0); a token's last byte's node
    holds its codeword's length and value. Cached per codebook (read-only once built)."""
    root: dict[int, TrieNode] = {}
    for token, code in book.tokens.items():
        children = root
        for depth, byte in enumerate(token):
            node = children.get(byte)
            if depth == len(token) - 1:
                kids = node[0] if node is not None else {}
                children[byte] = (kids, len(code), int(code, 2))
            elif node is None:
                node = children[byte] = ({}, 0, 0)
                children = node[0]
            else:
                children = node[0]
    return root


def _utf8_all(items: list[str] | tuple[str, ...]) -> list[bytes]:
    try:
        return [item.encode("utf-8") for item in items]
    except (UnicodeEncodeError, AttributeError):
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise ConfigError(f"item {i} is a {type(item).__name__}, not a string") from None
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError(f"item {i} ({item!r}) is not valid Unicode (a lone "
                                  "surrogate?)") from None
        raise


class _Reader:
    """Reads a bit string symbol by symbol into bytes and shown impossible parts."""

    def __init__(self, book: Codebook, tree: CodeTree, bits: str) -> None:
        self.book = book
        self.tree = tree
        self.bits = bits
        self.parts: list[tuple[str, object]] = []  # ("byte", (value, start bit)) / ("bad", str)
        self.ended = False
        self.problem = ""
        self.trailing_bits = 0
        self.open_bits = 0  # (bits of an unfinished codeword, escape or continuation)
        self.partial = b""

    def _bad(self, shown: str, problem: str) -> None:
        self.parts.append(("bad", shown))
        self.problem = self.problem or problem

    def read(self) -> None:
        bits, pos = self.bits, 0
        raw = CONTINUATION_PAYLOAD_BITS if self.book.raw_continuations else 0
        pending = 0  # raw continuation bytes the last first byte announced
        while pos < len(bits):
            start, node = pos, 0
            if pending:
                if pos + raw > len(bits):
                    self.trailing_bits = self.open_bits = len(bits) - start
                    return
                self.parts.append(("byte", (0x80 | int(bits[pos : pos + raw], 2), start)))
                pos += raw
                pending -= 1
                continue
            leaf: object = None
            while pos < len(bits):
                child = self.tree.children[node][int(bits[pos])]
                pos += 1
                if child is None:
                    pos = min(start + self.book.max_codeword, len(bits))
                    self._bad(f"⟨{bits[start:pos]}⟩",
                              f"unused codeword {bits[start:pos]} at bit {start}")
                    leaf = "bad"
                    break
                if isinstance(child, int):
                    node = child
                    continue
                leaf = child
                break
            if leaf is None:
                self.trailing_bits = self.open_bits = len(bits) - start
                return
            if leaf == "bad":
                continue
            kind = leaf[0]  # type: ignore[index]
            if kind == "end":
                self.ended = True
                if "1" in bits[pos:]:
                    self._bad(f"⟨{bits[pos:]}⟩", f"nonzero bits after the end symbol (bit "
                              f"{pos + bits[pos:].index('1')})")
                if not any(k == "byte" for k, _ in self.parts):
                    self.problem = self.problem or "the end symbol before any byte (empty item)"
                return
            if kind == "escape":
                if pos + 8 > len(bits):
                    self.trailing_bits = self.open_bits = len(bits) - start
                    return
                value = int(bits[pos : pos + 8], 2)
                pos += 8
                if value in self.book.bytes:
                    self._bad(f"⟨{bits[start:pos]}⟩", f"escape of byte 0x{value:02x}, which has "
                              f"its own codeword, at bit {start}")
                    continue
            else:
                for value in leaf[1]:  # type: ignore[index]
                    self.parts.append(("byte", (value, start)))
                if raw and len(leaf[1]) == 1:  # type: ignore[index]  # tokens are whole
                    pending = continuations(leaf[1][0])  # type: ignore[index]
                continue
            self.parts.append(("byte", (value, start)))
            if raw:
                pending = continuations(value)

    def last_bytes(self) -> bytes:
        """The bytes read since the last shown impossible part (a token may begin only
        after it)."""
        out = []
        for kind, payload in reversed(self.parts):
            if kind != "byte":
                break
            out.append(payload[0])  # type: ignore[index]
        return bytes(reversed(out))

    def text(self) -> str:
        """The parts as text; byte runs are decoded as UTF-8 (bytes that are not UTF-8 are shown
        as ⟨0xNN⟩; an incomplete character at the end becomes trailing bits)."""
        out: list[str] = []
        run: list[tuple[int, int]] = []
        for kind, payload in [*self.parts, ("end", None)]:
            if kind == "byte":
                run.append(payload)  # type: ignore[arg-type]
                continue
            out.append(self._decode_run(run, last=kind == "end"))
            run = []
            if kind == "bad":
                out.append(str(payload))
        return "".join(out)

    def _decode_run(self, run: list[tuple[int, int]], last: bool) -> str:
        data = bytes(v for v, _ in run)
        out: list[str] = []
        i = 0
        while i < len(data):
            try:
                out.append(data[i:].decode("utf-8"))
                break
            except UnicodeDecodeError as error:
                out.append(data[i : i + error.start].decode("utf-8"))
                bad_start, bad_end = i + error.start, i + error.end
                if last and not self.ended and bad_end == len(data) \
                        and error.reason == "unexpected end of data":
                    # The prefix stops inside a character: its bytes are trailing bits.
                    self.trailing_bits = len(self.bits) - run[bad_start][1]
                    self.partial = data[bad_start:]
                    break
                out.append("".join(f"⟨0x{b:02x}⟩" for b in data[bad_start:bad_end]))
                self.problem = self.problem or "bytes that are not UTF-8"
                i = bad_end
        return "".join(out)

