"""A truncated row says how much of its items it is: ``prefix_bytes``, the items' first bytes
it holds (its whole characters and those of a character it stops inside), in the JSON of
`fedhh simulate` (``HeavyHitter.to_dict``) and `fedhh admin results`, in `fedhh up`'s rows
and the dashboard's page, CSV and JSON. A cut item shows its beginning alone: two URLs that
differ at their end are one row, and before, nothing but its ``…`` said that the rest,
their ends too, was never found."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from fedhh.codec import Codec
from fedhh.codec.shown import cut_bytes, prefix_words
from fedhh.server.prefixtree import Found, shown_items
from fedhh_coordinator.dashboard.pages import hits_table
from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import _hit_json, hits_csv


@pytest.mark.parametrize("item", ["https://example.com/search?q=alpha", "東京タワーの高さ",
                                  "👍🏽👍🏽👍🏽👍🏽👍🏽", "a@b.example.org"])
@pytest.mark.parametrize("bits", [40, 60, 61, 67, 73])
def test_a_truncated_rows_bytes_are_its_items_first_ones(item: str, bits: int) -> None:
    """And the shown text alone says as many (``cut_bytes``: `fedhh up` and `fedhh admin
    results` have a ``Results`` reply's text), a character's bytes it stops inside too."""
    codec = Codec("unicode", bits)
    code = codec.encode(item)
    (hitter,) = shown_items(codec, [Found(code, 10.0, 3)])
    assert hitter.truncated
    decoded = codec.decode(code, bits)
    known = decoded.text.encode("utf-8") + decoded.partial
    assert 0 < hitter.prefix_bytes == len(known) < len(item.encode("utf-8"))
    assert item.encode("utf-8").startswith(known)
    assert cut_bytes(hitter.item) == hitter.prefix_bytes
    entry = hitter.to_dict()
    assert entry["prefix_bytes"] == hitter.prefix_bytes and entry["bits"] == bits


def test_a_whole_item_has_no_prefix_bytes() -> None:
    codec = Codec("unicode", 60)
    (hitter,) = shown_items(codec, [Found(codec.encode("007"), 10.0, 1)])
    assert not hitter.truncated and "prefix_bytes" not in hitter.to_dict()


CUT = Hit(rank=1, item="https://example\u2026", estimate=5.0, std=math.nan, round=3,
          truncated=True, bits=60, cause="the codes' limit", prefix_bytes=15)
WHOLE = Hit(rank=1, item="apple", estimate=10.0, std=math.nan, round=1)


def test_the_dashboard_says_how_many_bytes_a_cut_row_holds() -> None:
    page = str(hits_table("r1", [WHOLE], [CUT]))
    assert ("(cut at 60 bits: the first 15 bytes of every item starting so; the codes&#x27; limit)"
            in page)
    table = list(csv.DictReader(io.StringIO(hits_csv([WHOLE], [CUT]))))
    assert [row["prefix_bytes"] for row in table] == ["", "15"]
    assert json.loads(json.dumps(_hit_json(CUT)))["prefix_bytes"] == 15
    assert "prefix_bytes" not in _hit_json(WHOLE)


def test_a_prefix_without_a_whole_byte_says_every_item_starting_so() -> None:
    assert prefix_words(7, 0) == "cut at 7 bits: every item starting so"
    assert prefix_words(121, 1) == "cut at 121 bits: the first 1 byte of every item starting so"
