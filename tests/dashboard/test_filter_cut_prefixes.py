"""The heavy-hitter filter matches a cut prefix by the characters it stands for
(``Hit.text``, ``fedhh.codec.shown.cut_item``), not by its marks. Before, the page's
``data-item`` and the downloads matched the shown text, so ``?q=bits`` kept every row cut
inside a codeword (``ab⟨+3 bits⟩…``), ``…`` every cut row, and ``a\\b`` missed the cut prefix
of ``a\\bc``, whose backslash its shown text doubles."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from typing import Any
from urllib.parse import quote

from dashboard_kit import Served

from fedhh.codec.codec import Decoded
from fedhh.codec.shown import cut_item
from fedhh_coordinator.dashboard.pages import hits_table
from fedhh_coordinator.dashboard.results import Hit

# Cut prefixes as the codec shows them, and the characters each stands for.
CUT = {
    Decoded("ab", False, True, 3, open_bits=3).shown_cut: "ab",
    Decoded("caf", False, True, 8, partial=b"\xc3").shown_cut: "caf",
    Decoded("a\\b", False, True, 0).shown_cut: "a\\b",
    Decoded("x⟨+2 bits⟩y", False, True, 2, open_bits=2).shown_cut: "x⟨+2 bits⟩y",
    Decoded("a\\x41", False, True, 0).shown_cut: "a\\x41",
    "⟨0110⟩…": "",  # (Codec.display of a prefix without a whole byte)
}
HITS = ("bits", "a\\bc", "wait…")


def test_a_cut_prefix_reads_back_as_the_characters_it_stands_for() -> None:
    assert list(CUT) == ["ab⟨+3 bits⟩…", "caf\\xc3…", "a\\\\b…", "x\\u27e8+2 bits⟩y⟨+2 bits⟩…",
                         "a\\\\x41…", "⟨0110⟩…"]
    assert [cut_item(shown) for shown in CUT] == list(CUT.values())


def _lists() -> tuple[tuple[Hit, ...], tuple[Hit, ...]]:
    hits = tuple(Hit(rank, item, 10.0, 1.0, 1) for rank, item in enumerate(HITS, 1))
    cut = tuple(Hit(rank, shown, 5.0, 1.0, 2, truncated=True, bits=24)
                for rank, shown in enumerate(CUT, 1))
    return hits, cut


def test_the_pages_rows_carry_a_cut_prefix_by_its_characters() -> None:
    hits, cut = _lists()
    copies = re.findall(r'<tr data-item="([^"]*)">', str(hits_table("r1", hits, cut)))
    assert [json.loads(f'"{html.unescape(copy)}"') for copy in copies] == [
        *HITS, *CUT.values()]


def test_the_downloads_match_a_cut_prefix_by_its_characters(served: Served) -> None:
    real = served.views.run
    hits, cut = _lists()

    async def run(run_id: str, *args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(await real(run_id, *args, **kwargs), hits=hits, cut=cut)

    served.views.run = run
    session = {"Cookie": served.sign_in()}
    for needle, kept_hits, kept_cut in (
            ("bits", ["bits"], ["x⟨+2 bits⟩y"]), ("…", ["wait…"], []),
            ("\\x", [], ["a\\x41"]), ("a\\b", ["a\\bc"], ["a\\b"]), ("⟨", [], ["x⟨+2 bits⟩y"]),
            ("caf", [], ["caf"])):
        status, _, body = served.request(
            "GET", f"/runs/r1/heavy-hitters.json?q={quote(needle)}", headers=session)
        assert status == 200
        found = json.loads(body)
        assert [h["item"] for h in found["heavy_hitters"]] == kept_hits, needle
        assert [cut_item(h["item"]) for h in found["cut_prefixes"]] == kept_cut, needle
