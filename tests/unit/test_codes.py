"""Code arrays of any width against Python integer arithmetic (the specification)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec import codes as cw
from fedhh.errors import ConfigError

widths = st.sampled_from([1, 5, 33, 63, 64, 65, 100, 127, 128, 129, 192, 256, 300, 1024])


@st.composite
def values_of(draw, bits: int | None = None):
    bits = draw(widths) if bits is None else bits
    values = draw(st.lists(st.integers(min_value=0, max_value=(1 << bits) - 1), min_size=0,
                           max_size=20))
    return bits, values


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=values_of())
def test_ints_words_and_wire_round_trip(data) -> None:
    bits, values = data
    array = cw.from_ints(values, bits)
    assert array.dtype == cw.code_dtype(bits) and cw.to_ints(array) == values
    assert cw.to_ints(cw.from_words(cw.to_words(array, bits), bits)) == values
    assert cw.to_ints(cw.from_wire(cw.to_wire(array, bits), bits, "x")) == values
    if bits <= 64:
        assert cw.to_wire(array, bits) == values  # the old fixed64 form, unchanged


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=values_of(), pick=st.data())
def test_order_and_search_follow_the_numbers(data, pick) -> None:
    bits, values = data
    array = cw.from_ints(values, bits)
    assert cw.to_ints(np.sort(array)) == sorted(values)
    assert cw.to_ints(np.unique(array)) == sorted(set(values))
    table = np.unique(array)
    queries = pick.draw(st.lists(st.integers(0, (1 << bits) - 1), max_size=10)) + values
    found = cw.index_in(table, cw.from_ints(queries, bits)).tolist()
    ordered = sorted(set(values))
    assert found == [ordered.index(q) if q in ordered else -1 for q in queries]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=values_of(), pick=st.data())
def test_prefix_and_segment_arithmetic(data, pick) -> None:
    bits, values = data
    array = cw.from_ints(values, bits)
    length = pick.draw(st.integers(0, bits))
    assert cw.to_ints(cw.leading(array, bits, length)) == [v >> (bits - length) for v in values]
    seg = pick.draw(st.integers(0, min(63, bits)))
    start = pick.draw(st.integers(0, bits - seg))
    mask = (1 << seg) - 1
    assert cw.field(array, bits, start, seg).tolist() == \
        [(v >> (bits - start - seg)) & mask for v in values]
    extra = pick.draw(st.integers(1, 63))
    segments = [pick.draw(st.integers(0, (1 << extra) - 1)) for _ in values]
    joined = cw.append(array, bits, np.array(segments, dtype=np.int64), extra)
    assert cw.to_ints(joined) == [(v << extra) | s for v, s in zip(values, segments, strict=True)]
    wider = bits + pick.draw(st.integers(0, 200))
    assert cw.to_ints(cw.widen(array, bits, wider)) == [v << (wider - bits) for v in values]


def test_bad_values_and_wire_forms_are_refused() -> None:
    with pytest.raises(ConfigError, match="not a non-negative integer of 5 bits"):
        cw.from_ints([32], 5)
    with pytest.raises(ConfigError, match="not a non-negative integer of 100 bits"):
        cw.from_ints([-1], 100)
    with pytest.raises(ConfigError, match="not a multiple"):
        cw.from_wire([1, 2, 3], 100, "deny list")
    with pytest.raises(ConfigError, match="wider than 100 bits"):
        cw.from_wire([1 << 40, 0], 100, "deny list")
    with pytest.raises(ConfigError, match="wider than 0 bits"):
        cw.from_wire([1], 0, "prefix list")
    with pytest.raises(ConfigError, match="must be a"):
        cw.check_array(np.zeros(3, np.uint64), 100)
