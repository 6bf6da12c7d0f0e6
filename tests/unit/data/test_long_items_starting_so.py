"""``starting_so``: of a cut row's known bytes, the dataset's items that begin with them (how
many, how many bytes longer, the most held whole), found as one span of the sorted
vocabulary; a row of bits alone (no whole byte) gets none, where every item would do."""

from __future__ import annotations

import numpy as np

from fedhh.data.long_items import starting_so

VOCABULARY = tuple(sorted(["https://a.example/x?q=1", "https://a.example/x?q=22",
                           "https://a.example/y", "https://b.example", "東京", "東北", "棒"]))


def test_the_items_a_prefix_begins() -> None:
    held = np.array([{"https://a.example/x?q=22": 0.5, "https://a.example/y": 0.25}.get(
        item, 0.1) for item in VOCABULARY])
    (urls, tokyo, partial, none) = starting_so(
        VOCABULARY, held, [b"https://a.example/", "東京".encode(), "東".encode()[:2], b""])
    assert urls == {"items": 3, "bytes_more": [1, 6],
                    "most_held": ["https://a.example/x?q=22", "https://a.example/y",
                                  "https://a.example/x?q=1"]}
    assert tokyo == {"items": 1, "bytes_more": [0, 0], "most_held": ["東京"]}
    # (two bytes of 東, whose third byte the row stops before: not 棒, U+68D2, e6 a3 92)
    assert partial == {"items": 2, "bytes_more": [4, 4], "most_held": ["東京", "東北"]}
    assert none is None


def test_without_the_data_s_counts_the_first_in_the_vocabularys_order() -> None:
    (found,) = starting_so(VOCABULARY, None, [b"https://"])
    assert found == {"items": 4, "bytes_more": [9, 16], "first": list(VOCABULARY[:3])}
