"""The heavy-hitter filter's copy of each item (a row's ``data-item``, pages.filter_copy): the
page holds no raw control or bidirectional character, and the filter (static/app.js) matches
each kind of item exactly, emoji, right-to-left text, controls and quotes among them. Before,
the attribute held the item raw: ``curl`` of the page printed ESC to the terminal (and showed
U+202E's reversal), and the HTML parser read a NUL there as U+FFFD, so that a filter holding
the NUL matched nothing. The downloads keep what the page's filter keeps (before, the server
case-folded, ß as ss: a download filtered "ss" held the row "straße" the page hid)."""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import re
import unicodedata
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from dashboard_kit import Served

from fedhh.rpc.tls import make_dev_pki
from fedhh_coordinator.dashboard.pages import FILTER_MAX_LENGTH, filter_copy, hits_table
from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.server import MAX_FILTER

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # (one emoji: three joined by ZWJ)
ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Each item, and a filter that holds what is special about it (none with a CR or LF, which a
# search box strips, nor starting or ending in a space, which the filter trims).
ITEMS = {
    "apple": "APP",
    "red\x1b[31m": "\x1b[31",
    "nul\x00byte": "l\x00b",
    "\u202eevil": "\u202ee",
    f"{FAMILY} family": "\u200d\U0001f469\u200d",
    ENGLAND: "\U000e0067\U000e0062",
    "שלום עולם": "ם ע",
    "مرحبا": "رح",
    'say "hi" \\now': '"hi" \\',
    "<i>x&amp;": "<i>x&amp",
    "c1\x85\x9b\x7f": "\x85\x9b\x7f",
    "tab\there": "b\th",
    "line\u2028sep": "e\u2028s",
    "nb\xa0sp": "b\xa0s",
    "ＡＢＣ": "ｂ",
    "cr\rlf\nend": "cr",
    "\ue000private\ufeff": "\ue000p",
    "straße": "ß",
    "STRASSE": "ss",
    "ﬁnance": "ﬁn",
}


def _page() -> str:
    hits = [Hit(rank, item, 10.0, 1.0, 1) for rank, item in enumerate(ITEMS, 1)]
    return str(hits_table("r1", hits))


def test_the_page_holds_no_raw_control_or_bidi_character_and_each_copy_reads_back_exact(
) -> None:
    page = _page()
    assert [c for c in page if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in BIDI] == []
    copies = re.findall(r'<tr data-item="([^"]*)">', page)
    # (the shown text keeps the joiners of an emoji sequence and the tags of a flag, which
    # draw: fedhh.codec.shown; the copies escape every character that is not printable)
    assert all(copy.isprintable() for copy in copies)
    assert [json.loads(f'"{html.unescape(copy)}"') for copy in copies] == list(ITEMS)
    # (printable text is carried as it is: a page of Russian, Hebrew or emoji items stays
    # readable in its source)
    assert filter_copy("Москва שלום 東京 👍") == "Москва שלום 東京 👍"
    assert filter_copy(FAMILY) == "\U0001f468\\u200d\U0001f469\\u200d\U0001f467"
    assert filter_copy("\U000e0067\ud800") == "\\udb40\\udc67\\ud800"
    assert json.loads('"' + filter_copy("\U000e0067") + '"') == "\U000e0067"


@pytest.mark.slow  # (a Chromium of its own: 5 s)
def test_the_filter_matches_each_kind_of_item_exactly(
        tmp_path: Path, chromium: Callable[..., Any]) -> None:
    script = (resources.files("fedhh_coordinator.dashboard") / "static" / "app.js").read_text()
    page = ('<!doctype html><html><head><meta charset="utf-8"></head><body>'
            '<input id="hh-filter" type="search">'
            '<a id="hh-csv" href="/runs/r1/heavy-hitters.csv">CSV</a>'
            '<a id="hh-json" href="/runs/r1/heavy-hitters.json">JSON</a>'
            f'{_page()}<script>{script}</script>'
            '</body></html>')
    tls = make_dev_pki(tmp_path / "tls", ["127.0.0.1"])  # (the fixture's drivers trust a key)
    driver = chromium(tls.cert)
    driver.get("data:text/html;charset=utf-8;base64,"
               + base64.b64encode(page.encode()).decode())
    items = list(ITEMS)
    for item, needle in ITEMS.items():
        shown = driver.execute_script("""
            const box = document.getElementById("hh-filter");
            box.value = arguments[0];
            box.dispatchEvent(new Event("input"));
            return [box.value, document.body.getAttribute("data-shown"),
                    [...document.querySelectorAll("table.hits tbody tr")].flatMap(
                      (row, i) => row.hidden ? [] : [i])];""", needle)
        expected = [i for i, other in enumerate(items) if needle.lower() in other.lower()]
        assert items.index(item) in expected
        assert shown == [needle, str(len(expected)), expected], repr(item)
    # A lone surrogate (here the first half of the flag's tags) has no URL form: the downloads
    # are withdrawn, not left on the previous filter, and the rows still follow the filter
    # (before, encodeURIComponent threw after hiding them: links and count kept "ﬁn"'s).
    filtering = """
        const box = document.getElementById("hh-filter");
        box.value = arguments[0] === null ? String.fromCharCode(0xdb40) : arguments[0];
        box.dispatchEvent(new Event("input"));
        return [document.body.getAttribute("data-shown"),
                ["hh-csv", "hh-json"].map((id) => {
                  const link = document.getElementById(id);
                  return [link.getAttribute("href"), link.getAttribute("aria-disabled")];
                })];"""
    assert driver.execute_script(filtering, None) == [
        str(sum("\U000e0067" in item for item in items)), [[None, "true"], [None, "true"]]]
    assert driver.execute_script(filtering, "a&b") == ["0", [
        ["/runs/r1/heavy-hitters.csv?q=a%26b", None],
        ["/runs/r1/heavy-hitters.json?q=a%26b", None]]]


def test_the_downloads_keep_what_the_pages_filter_keeps(served: Served) -> None:
    real = served.views.run
    items = ("straße", "STRASSE", "ﬁnance", "finance")

    async def run(run_id: str, *args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(await real(run_id, *args, **kwargs), hits=tuple(
            Hit(rank, item, 10.0, 1.0, 1) for rank, item in enumerate(items, 1)), cut=())

    served.views.run = run
    session = {"Cookie": served.sign_in()}
    for needle in ("ss", "ß", "SS", "fin", "ﬁn"):
        status, _, body = served.request(
            "GET", f"/runs/r1/heavy-hitters.json?q={quote(needle)}", headers=session)
        assert status == 200
        kept = [hit["item"] for hit in json.loads(body)["heavy_hitters"]]
        # (the page's filter: app.js lowers the item and the filter, as str.lower does, which
        # the browser test above holds it to)
        assert kept == [item for item in items if needle.lower() in item.lower()], needle


def _utf16_units(text: str) -> int:
    """A text's length as JavaScript (and an input's maxlength) counts it."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def test_every_filter_the_box_takes_reaches_the_downloads_whole(served: Served) -> None:
    # (before, the box had no maxlength: a filter past the downloads' cut of 200 characters
    # was matched whole on the page and cut in the downloads, which then held rows it hid)
    session = {"Cookie": served.sign_in()}
    status, _, page = served.request("GET", "/runs/r1", headers=session)
    assert status == 200
    box = re.search(r'<input id="hh-filter"[^>]*>', page.decode())
    assert box is not None
    maxlength = re.search(r' maxlength="(\d+)"', box.group())
    assert maxlength is not None, box.group()
    longest = int(maxlength.group(1))
    assert longest == FILTER_MAX_LENGTH
    # Lowering (the page's toLowerCase, str.lower here) at most doubles a text's code units,
    # and the downloads' cut counts code points, never more than the units: one character
    # lowers to more units than it has, U+0130, to two from one.
    chars = list(map(chr, range(0x110000)))
    changed = [(c, low) for c, low in zip(chars, map(str.lower, chars), strict=True)
               if low != c]
    assert [(c, low) for c, low in changed if _utf16_units(low) > _utf16_units(c)] == [
        ("\u0130", "i\u0307")]
    assert 2 * longest <= MAX_FILTER
    # The worst case: the longest filter, every character one that lowers to two.
    needle = ("\u0130" * longest).lower()
    assert len(needle) == 2 * longest
    items = (needle + "x", needle[:-1] + "x", "\u0130" * longest, needle[2:])
    real = served.views.run

    async def run(run_id: str, *args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(await real(run_id, *args, **kwargs), hits=tuple(
            Hit(rank, item, 10.0, 1.0, 1) for rank, item in enumerate(items, 1)), cut=())

    served.views.run = run
    status, _, body = served.request(
        "GET", f"/runs/r1/heavy-hitters.json?q={quote(needle)}", headers=session)
    assert status == 200 and json.loads(body)["filter"] == needle
    kept = [hit["item"] for hit in json.loads(body)["heavy_hitters"]]
    assert kept == [item for item in items if needle in item.lower()] == [items[0], items[2]]
