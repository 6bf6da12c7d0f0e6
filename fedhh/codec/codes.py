"""Arrays of fixed-width bit strings: item codes, prefixes and domain elements.

A value of ``bits`` bits is a non-negative integer below ``2**bits``; an item code is its bits
left-aligned in ``max_bits`` bits (zero padded), so the length-L prefix of a code is
``code >> (max_bits - L)`` whatever the width. Arrays of such values are one-dimensional and
their dtype depends only on the width:

- up to 64 bits: ``uint64``, the value itself (the fast path: every operation below is one numpy
  shift or mask, exactly as before wider codes existed);
- wider: ``S{8W}`` with W = ceil(bits / 64), the value's W big-endian 64-bit words as bytes.
  Byte strings of one length compare like the numbers they hold, so ``np.sort``,
  ``np.unique``, ``np.searchsorted``, ``np.isin`` and ``np.union1d`` work unchanged. (numpy
  drops trailing NUL bytes when it hands out *one* element of an ``S`` array, so single values
  go through ``to_ints``, never ``bytes(array[i])``.)

Arithmetic on wide values works on their words: ``to_words`` gives a native ``(n, W)`` uint64
array (word 0 most significant), ``from_words`` packs it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from fedhh.errors import ConfigError

WORD_BITS = 64
_U64 = np.uint64


def words_for(bits: int) -> int:
    """64-bit words that hold a ``bits``-bit value (at least one)."""
    return max(1, -(-bits // WORD_BITS))


def code_dtype(bits: int) -> np.dtype:
    """The dtype of an array of ``bits``-bit values."""
    if bits <= WORD_BITS:
        return np.dtype(np.uint64)
    return np.dtype(f"S{8 * words_for(bits)}")


def empty(bits: int) -> np.ndarray:
    return np.zeros(0, dtype=code_dtype(bits))


def check_array(values: np.ndarray, bits: int, what: str = "codes") -> np.ndarray:
    """``values`` as an array of ``bits``-bit values; a wrong dtype is a ConfigError."""
    array = np.asarray(values)
    want = code_dtype(bits)
    if array.dtype != want:
        if array.size == 0:
            return empty(bits)
        raise ConfigError(f"{what} of {bits} bits must be a {want} array, got {array.dtype}")
    return array.reshape(-1)


def from_ints(values: Iterable[int], bits: int) -> np.ndarray:
    """An array of the given integers, each in ``[0, 2**bits)``."""
    items = values if isinstance(values, list | tuple) else list(values)
    if bits <= WORD_BITS:
        try:
            array = np.array(items, dtype=np.uint64).reshape(-1)
        except (OverflowError, TypeError, ValueError):
            array = None
        if array is not None and (bits == WORD_BITS or not np.any(array >> _U64(bits))):
            return array
    for v in items:
        if not isinstance(v, int | np.integer) or v < 0 or int(v) >> bits:
            raise ConfigError(f"value {v!r} is not a non-negative integer of {bits} bits")
    size = 8 * words_for(bits)
    items = [int(v) for v in items]
    return np.array([v.to_bytes(size, "big") for v in items], dtype=f"S{size}")


def like(values: np.ndarray | Iterable[int], dtype: np.dtype) -> np.ndarray:
    """Codes given as an array or as integers, as a 1-D array of ``dtype`` (the dtype of an
    existing code array: uint64, or S{8W} for W-word codes)."""
    if isinstance(values, np.ndarray) and values.dtype == dtype:
        return values.reshape(-1)
    if isinstance(values, np.ndarray) and values.size == 0:
        return np.zeros(0, dtype=dtype)
    if isinstance(values, np.ndarray) and values.dtype.kind in "SV":
        raise ConfigError(f"codes of dtype {values.dtype} where {dtype} codes are expected")
    if dtype == np.uint64:
        return from_ints(values, WORD_BITS)
    return from_ints(values, dtype.itemsize * 8)


def to_ints(values: np.ndarray) -> list[int]:
    """The integers an array holds (either dtype)."""
    array = np.asarray(values)
    if array.dtype == np.uint64:
        return [int(v) for v in array.reshape(-1).tolist()]
    rows = np.ascontiguousarray(array.reshape(-1)).view(np.uint8).reshape(
        array.size, array.dtype.itemsize)
    return [int.from_bytes(row.tobytes(), "big") for row in rows]


def to_words(values: np.ndarray, bits: int) -> np.ndarray:
    """Native ``(n, W)`` uint64 words of ``bits``-bit values, most significant word first."""
    array = check_array(values, bits)
    if bits <= WORD_BITS:
        return array.reshape(-1, 1)
    return np.ascontiguousarray(array).view(">u8").reshape(
        array.size, array.dtype.itemsize // 8).astype(np.uint64)


def from_words(words: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of ``to_words``: ``(n, W)`` words of ``bits``-bit values as a value array."""
    words = np.asarray(words, dtype=np.uint64)
    width = words_for(bits)
    if words.ndim != 2 or words.shape[1] != width:
        raise ConfigError(f"{bits}-bit values need {width} words each, got shape {words.shape}")
    if bits <= WORD_BITS:
        return np.ascontiguousarray(words[:, 0])
    return np.ascontiguousarray(words.astype(">u8")).view(f"S{8 * width}").reshape(-1)


def to_wire(values: np.ndarray, bits: int) -> list[int]:
    """The values as a flat list of 64-bit words (each value's words, most significant first):
    the ``repeated fixed64`` form of the task; for values of at most 64 bits, the values."""
    return [int(w) for w in to_words(values, bits).reshape(-1).tolist()]


def from_wire(words: Sequence[int], bits: int, what: str) -> np.ndarray:
    """Inverse of ``to_wire``; a length that is not a whole number of values is an error."""
    width = words_for(bits)
    if len(words) % width:
        raise ConfigError(f"{what} holds {len(words)} words, not a multiple of the {width} "
                          f"words of a {bits}-bit value")
    array = np.array(words, dtype=np.uint64).reshape(-1, width)
    top_bits = bits - WORD_BITS * (width - 1)  # bits used in each value's first word
    if top_bits < WORD_BITS and array.size and np.any(array[:, 0] >> _U64(top_bits)):
        raise ConfigError(f"{what} holds a value wider than {bits} bits")
    return from_words(array, bits)


def _shift_right_words(words: np.ndarray, shift: int, keep: int) -> np.ndarray:
    """The last ``keep`` words of ``words >> shift`` (``words`` is ``(n, W)``)."""
    n, width = words.shape
    q, r = divmod(shift, WORD_BITS)
    out = np.zeros((n, keep), dtype=np.uint64)
    for j in range(keep):
        i = width - keep + j  # output word i of the full-width result
        src = i - q
        if src < 0:
            continue
        if r == 0:
            out[:, j] = words[:, src]
            continue
        out[:, j] = words[:, src] >> _U64(r)
        if src >= 1:
            out[:, j] |= words[:, src - 1] << _U64(WORD_BITS - r)
    return out


def leading(values: np.ndarray, bits: int, length: int) -> np.ndarray:
    """The first ``length`` bits of each ``bits``-bit value (``values >> (bits - length)``)."""
    if not 0 <= length <= bits:
        raise ConfigError(f"cannot take {length} leading bits of {bits}-bit values")
    if bits <= WORD_BITS:
        array = check_array(values, bits)
        return array >> _U64(bits - length) if length else np.zeros(array.size, np.uint64)
    words = to_words(values, bits)
    return from_words(_shift_right_words(words, bits - length, words_for(length)), length)


def field(values: np.ndarray, bits: int, start: int, length: int) -> np.ndarray:
    """Bits ``[start, start + length)`` of each ``bits``-bit value as int64 (length <= 63)."""
    if not (start >= 0 and 0 <= length <= 63 and start + length <= bits):
        raise ConfigError(f"cannot take bits [{start}, {start + length}) of {bits}-bit values")
    mask = _U64((1 << length) - 1)
    shift = bits - start - length
    if bits <= WORD_BITS:
        return ((check_array(values, bits) >> _U64(shift)) & mask).astype(np.int64)
    last = _shift_right_words(to_words(values, bits), shift, 1)[:, 0]
    return (last & mask).astype(np.int64)


def append(prefixes: np.ndarray, bits: int, segments: np.ndarray, seg_bits: int) -> np.ndarray:
    """``(prefix << seg_bits) | segment`` per element: values of ``bits + seg_bits`` bits."""
    total = bits + seg_bits
    segments = np.asarray(segments).astype(np.uint64)
    if total <= WORD_BITS:
        head = check_array(prefixes, bits) << _U64(seg_bits) if bits else \
            np.zeros(segments.size, np.uint64)
        return head | segments
    width = words_for(total)
    out = np.zeros((segments.size, width), dtype=np.uint64)
    if bits:
        out[:, width - words_for(bits):] = to_words(prefixes, bits)
    out = _shift_left_words(out, seg_bits)
    out[:, -1] |= segments  # seg_bits <= 63: the segment lies in the last word
    return from_words(out, total)


def widen(values: np.ndarray, bits: int, to_bits: int) -> np.ndarray:
    """``values << (to_bits - bits)``: ``bits``-bit values left-aligned in ``to_bits`` bits."""
    if to_bits < bits:
        raise ConfigError(f"cannot widen {bits}-bit values to {to_bits} bits")
    if to_bits <= WORD_BITS:
        return check_array(values, bits) << _U64(to_bits - bits)
    width = words_for(to_bits)
    out = np.zeros((np.asarray(values).size, width), dtype=np.uint64)
    if bits:
        out[:, width - words_for(bits):] = to_words(values, bits)
    return from_words(_shift_left_words(out, to_bits - bits), to_bits)


def _shift_left_words(words: np.ndarray, shift: int) -> np.ndarray:
    width = words.shape[1]
    q, r = divmod(shift, WORD_BITS)
    out = np.zeros_like(words)
    for i in range(width):
        src = i + q
        if src >= width:
            continue
        if r == 0:
            out[:, i] = words[:, src]
            continue
        out[:, i] = words[:, src] << _U64(r)
        if src + 1 < width:
            out[:, i] |= words[:, src + 1] >> _U64(WORD_BITS - r)
    return out


def index_in(sorted_values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Position of each query in the ascending array ``sorted_values``, or -1 when absent."""
    queries = np.asarray(queries)
    if sorted_values.size == 0:
        return np.full(queries.shape, -1, dtype=np.int64)
    pos = np.searchsorted(sorted_values, queries)
    hit = sorted_values[np.minimum(pos, sorted_values.size - 1)] == queries
    return np.where(hit & (pos < sorted_values.size), pos, -1).astype(np.int64)
