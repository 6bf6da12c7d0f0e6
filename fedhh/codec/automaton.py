"""Which bit strings an honest device can hold: the code's grammar as a finite automaton.

A device encodes a non-empty, valid Unicode string (``fedhh.codec.codebook``): its UTF-8 bytes,
written as symbols (a byte's or a token's codeword, or the escape and a byte), then the end
symbol, then zero padding up to ``max_bits`` (or the code is cut at ``max_bits``). A prefix
of ``L`` bits is *possible* when some such code starts with it. Everything else is impossible
and leaves the candidate set at once:

- an unused codeword (a path that leaves the code tree, e.g. the 5-bit values 28-31);
- an invalid escape (the escape followed by a byte that has a codeword of its own);
- bytes that are not UTF-8 (a stray continuation byte, an overlong form, a surrogate, a byte
  above 0xF4), and the end symbol inside a multi-byte character;
- the end symbol before any byte (the empty item);
- a 1 bit after the end symbol (codes are zero padded).

The automaton reads bits; its state is (node of the code tree, or position in an escape's 8 bits
or in a raw continuation byte's 6; the UTF-8 decoder's state; whether a byte was written yet),
or "ended" (padding), or DEAD. With raw continuations the six bits after a first byte are a
continuation byte whatever they are, and the UTF-8 rules decide which of them are possible
(after 0xe0 only 0xa0-0xbf, and so on). A token is whole characters, so after a token the
decoder accepts again. With tokens the automaton allows every writing of a string, not only the
canonical one a device sends: the other writings count as possible (their true count is zero),
which only makes the expected false positives of a round larger, never smaller. States from
which no complete code can be reached are merged into DEAD, so "possible" is exactly "not DEAD",
and the test is exact, not a heuristic. ``step8`` reads a whole byte at once, which makes the
per-round work a few table look-ups per domain element.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from fedhh.codec import codes as cw
from fedhh.codec.codebook import CONTINUATION_PAYLOAD_BITS, ESCAPE_PAYLOAD_BITS, Codebook

DEAD = 0
ENDED = 1

# UTF-8 decoder states (RFC 3629, section 4): what the next byte must be.
_ACCEPT, _C1, _C2, _C3, _E0, _ED, _F0, _F4 = range(8)
_CONTINUATION = {  # state: (lowest, highest) allowed byte, next state
    _C1: (0x80, 0xBF, _ACCEPT), _C2: (0x80, 0xBF, _C1), _C3: (0x80, 0xBF, _C2),
    _E0: (0xA0, 0xBF, _C1), _ED: (0x80, 0x9F, _C1), _F0: (0x90, 0xBF, _C2),
    _F4: (0x80, 0x8F, _C2),
}


def utf8_next(state: int, byte: int) -> int | None:
    """The UTF-8 decoder's state after ``byte``, or None when the byte is not allowed."""
    if state != _ACCEPT:
        low, high, nxt = _CONTINUATION[state]
        return nxt if low <= byte <= high else None
    if byte < 0x80:
        return _ACCEPT
    if 0xC2 <= byte <= 0xDF:
        return _C1
    if byte == 0xE0:
        return _E0
    if byte == 0xED:
        return _ED
    if 0xE1 <= byte <= 0xEF:
        return _C2
    if byte == 0xF0:
        return _F0
    if 0xF1 <= byte <= 0xF3:
        return _C3
    if byte == 0xF4:
        return _F4
    return None


_STILL_TO_READ = {_C1: 1, _C2: 2, _E0: 2, _ED: 2, _C3: 3, _F0: 3, _F4: 3}


def continuations(first: int) -> int:
    """How many continuation bytes follow ``first`` (0 after ASCII or a byte that starts no
    character): what the UTF-8 decoder's state after it still has to read."""
    state = utf8_next(_ACCEPT, first)
    return 0 if state is None else _STILL_TO_READ.get(state, 0)


@dataclass(frozen=True)
class CodeTree:
    """The codebook's codewords as a binary trie. ``children[node][bit]`` is another node
    (int >= 0), a leaf (``("bytes", data)`` for a byte or a token, ``("end",)``,
    ``("escape",)``) or None (unused)."""

    children: tuple[tuple[object, object], ...]

    @staticmethod
    def of(book: Codebook) -> CodeTree:
        nodes: list[list[object]] = [[None, None]]
        leaves: list[tuple[str, tuple[object, ...]]] = [(book.end, ("end",))]
        if book.escape is not None:
            leaves.append((book.escape, ("escape",)))
        leaves += [(code, ("bytes", bytes([value]))) for value, code in book.bytes.items()]
        leaves += [(code, ("bytes", token)) for token, code in book.tokens.items()]
        for code, leaf in leaves:
            node = 0
            for i, ch in enumerate(code):
                bit = int(ch)
                if i == len(code) - 1:
                    nodes[node][bit] = leaf
                    break
                nxt = nodes[node][bit]
                if nxt is None:
                    nodes.append([None, None])
                    nxt = nodes[node][bit] = len(nodes) - 1
                node = int(nxt)  # type: ignore[call-overload]  # prefix-free: an inner node
        return CodeTree(tuple((a, b) for a, b in nodes))


class Automaton:
    """The DFA of possible prefixes of a codebook's codes (see the module docstring)."""

    def __init__(self, book: Codebook) -> None:
        self.book = book
        self.tree = CodeTree.of(book)
        names: dict[tuple[object, ...], int] = {("dead",): DEAD, ("ended",): ENDED}
        start: tuple[object, ...] = ("symbol", 0, _ACCEPT, True)
        names[start] = 2
        edges: list[list[int]] = [[DEAD, DEAD], [ENDED, DEAD], [0, 0]]
        queue = deque([start])
        while queue:
            state = queue.popleft()
            for bit in (0, 1):
                target = self._next(state, bit)
                if target not in names:
                    names[target] = len(edges)
                    edges.append([0, 0])
                    queue.append(target)
                edges[names[state]][bit] = names[target]
        step = np.array(edges, dtype=np.int64)
        live = _co_reachable(step, ENDED)
        # Renumber the live states compactly; every other state is DEAD.
        new_id = np.full(step.shape[0], DEAD, dtype=np.int64)
        order = [DEAD, ENDED, *[s for s in range(2, step.shape[0]) if live[s]]]
        new_id[order] = np.arange(len(order))
        self.num_states = len(order)
        dtype = np.int16 if self.num_states < 2**15 else np.int32
        self.step = new_id[step[order]].astype(dtype)
        self.step[DEAD] = DEAD
        self.start = int(new_id[2])
        self.step8 = self._byte_table()

    def _next(self, state: tuple[object, ...], bit: int) -> tuple[object, ...]:
        kind = state[0]
        if kind in ("dead",):
            return ("dead",)
        if kind == "ended":
            return ("ended",) if bit == 0 else ("dead",)
        if kind == "raw":  # a continuation byte's six bits (raw continuations)
            _, count, value, utf8 = state
            value = 2 * int(value) + bit  # type: ignore[call-overload]
            count = int(count) + 1  # type: ignore[call-overload]
            if count < CONTINUATION_PAYLOAD_BITS:
                return ("raw", count, value, utf8)
            return self._after_bytes(int(utf8), bytes([0x80 | value]))  # type: ignore[call-overload]
        if kind == "escape":
            _, count, value, utf8 = state
            value = 2 * int(value) + bit  # type: ignore[call-overload]
            count = int(count) + 1  # type: ignore[call-overload]
            if count < ESCAPE_PAYLOAD_BITS:
                return ("escape", count, value, utf8)
            if value in self.book.bytes:
                return ("dead",)  # an invalid escape: this byte has a codeword of its own
            return self._after_bytes(int(utf8), bytes([value]))  # type: ignore[call-overload]
        _, node, utf8, first = state
        child = self.tree.children[int(node)][bit]  # type: ignore[call-overload]
        if child is None:
            return ("dead",)  # an unused codeword
        if isinstance(child, int):
            return ("symbol", child, utf8, first)
        leaf = child
        if leaf[0] == "end":  # type: ignore[index]
            return ("ended",) if utf8 == _ACCEPT and not first else ("dead",)
        if leaf[0] == "escape":  # type: ignore[index]
            return ("escape", 0, 0, utf8)
        return self._after_bytes(int(utf8), leaf[1])  # type: ignore[index, call-overload]

    def _after_bytes(self, utf8: int, data: bytes) -> tuple[object, ...]:
        state = utf8
        for byte in data:
            nxt = utf8_next(state, byte)
            if nxt is None:
                return ("dead",)
            state = nxt
        if self.book.raw_continuations and state != _ACCEPT:
            return ("raw", 0, 0, state)
        return ("symbol", 0, state, False)

    def _byte_table(self) -> np.ndarray:
        """``step8[s, b]``: the state after reading the 8 bits of b from state s."""
        table = np.arange(self.num_states, dtype=self.step.dtype)[:, None]
        for _ in range(8):
            table = self.step[table].reshape(self.num_states, -1)
        return table

    # ---- vectorized reading ------------------------------------------------------------------
    def run(self, values: np.ndarray, bits: int, states: np.ndarray | None = None
            ) -> np.ndarray:
        """The state after reading each ``bits``-bit value (from ``states``, default start)."""
        array = cw.check_array(values, bits, "values")
        current = np.full(array.size, self.start, dtype=self.step.dtype) if states is None \
            else np.asarray(states, dtype=self.step.dtype).copy()
        if bits == 0 or array.size == 0:
            return current
        data = np.ascontiguousarray(cw.to_words(array, bits).astype(">u8")).view(np.uint8)
        data = data.reshape(array.size, -1)
        data = data[:, data.shape[1] - (bits + 7) // 8 :]
        head = bits % 8
        column = 0
        if head:
            for shift in range(head - 1, -1, -1):
                current = self.step[current, (data[:, 0] >> shift) & 1]
            column = 1
        for j in range(column, data.shape[1]):
            current = self.step8[current, data[:, j]]
        return current

    def extensions(self, state: int, seg_bits: int) -> np.ndarray:
        """The states after every ``seg_bits``-bit string from ``state``, in numeric order of
        the strings (``2**seg_bits`` entries)."""
        current = np.array([state], dtype=self.step.dtype)
        remaining = seg_bits
        while remaining >= 8:
            current = self.step8[current].reshape(-1)
            remaining -= 8
        for _ in range(remaining):
            current = self.step[current].reshape(-1)
        return current

    def domain_states(self, prefix_states: np.ndarray, seg_bits: int) -> np.ndarray:
        """States of the domain ``prefixes x {0,1}^seg_bits`` (prefix-major), given the states
        of the prefixes."""
        unique, inverse = np.unique(np.asarray(prefix_states), return_inverse=True)
        if unique.size == 1:
            return np.tile(self.extensions(int(unique[0]), seg_bits), prefix_states.size)
        tables = np.stack([self.extensions(int(s), seg_bits) for s in unique.tolist()])
        return tables[inverse].reshape(-1)


def _co_reachable(step: np.ndarray, target: int) -> np.ndarray:
    """States from which ``target`` can be reached."""
    predecessors: list[list[int]] = [[] for _ in range(step.shape[0])]
    for state, (a, b) in enumerate(step.tolist()):
        predecessors[a].append(state)
        predecessors[b].append(state)
    live = np.zeros(step.shape[0], dtype=bool)
    live[target] = True
    queue = deque([target])
    while queue:
        for p in predecessors[queue.popleft()]:
            if not live[p]:
                live[p] = True
                queue.append(p)
    return live
