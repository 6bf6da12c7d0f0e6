"""A round's domain in GF(q)^d: injective, the "nothing" point outside the domain, sizes."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.errors import ConfigError
from fedhh.pirappor.layout import RoundLayout


@pytest.mark.parametrize("q, prefixes, s", [(5, 1, 2), (5, 4, 2), (5, 5, 2), (5, 6, 2),
                                            (9, 100, 3), (17, 300, 4), (2999, 977, 10)])
def test_points_are_distinct_and_nothing_is_apart(q: int, prefixes: int, s: int) -> None:
    layout = RoundLayout(q, prefixes, s)
    assert q ** layout.prefix_digits > prefixes >= q ** (layout.prefix_digits - 1)
    indices = np.arange(-1, layout.size)
    points = layout.points(indices)
    assert points.shape == (layout.size + 1, layout.dimension)
    assert points.min() >= 0 and points.max() < q
    assert len({tuple(p) for p in points.tolist()}) == layout.size + 1
    # "Nothing" is prefix number |P| (one past the list), completion 0: on no line of the
    # domain, which the decoders never count.
    nothing = points[0]
    assert int(sum(int(d) * q**i for i, d in enumerate(nothing[:-1]))) == prefixes
    assert nothing[-1] == 0
    # Element order: prefix number h = w >> s (its base-q digits), completion t = w mod 2^s.
    w = int(indices[-1])
    digits = points[-1, :-1]
    assert int(sum(int(d) * q**i for i, d in enumerate(digits))) == w >> s
    assert points[-1, -1] == w & ((1 << s) - 1)
    assert np.array_equal(layout.prefix_points, points[1 :: 1 << s, :-1])


def test_report_size() -> None:
    layout = RoundLayout(2999, 977, 10)  # d = 2: (v0, v1, v2), 3 * log2(2999) = 34.6 bits
    assert (layout.dimension, layout.report_length) == (2, 3)
    assert (layout.report_bits, layout.report_bytes) == (35, 5)
    assert RoundLayout(8, 1, 2).report_bits == 9  # 8^3 = 2^9 exactly
    # The first round: one prefix plus "nothing": 3 elements of 23 bits.
    assert RoundLayout(8388617, 1, 23).report_bytes == 9
    assert RoundLayout(5, 4, 2).prefix_digits == 1 and RoundLayout(5, 5, 2).prefix_digits == 2


def test_bad_layouts_and_indices() -> None:
    with pytest.raises(ConfigError):
        RoundLayout(5, 0, 2)
    with pytest.raises(ConfigError):
        RoundLayout(8, 1, 3)  # q must exceed 2^s: the completion 2^s is "nothing"
    layout = RoundLayout(5, 3, 2)
    for bad in (-2, 12):
        with pytest.raises(ConfigError, match=str(bad)):
            layout.points(np.array([0, bad]))
