"""A right-to-left item does not reorder what stands beside it on its line or in its cell:
the web demo page's one-line list of heavy hitters, the dashboard's heavy-hitter cell (item,
then its cut note), and fedhh simulate's list of the items a cut deny-list item also denies.

In a layout of bidirectional text (UAX #9), neutrals between two right-to-left letters take
their direction, and a number after one does: before, the demo page's
``["שלום", "مرحبا"]`` listed the two in reverse, and the warning's
``שלום (40.0% of the users)`` showed the share before the item's letters. Each item is now
isolated: U+2068 and U+2069 on the page (``page_isolated``, what ``<bdi>`` is in markup),
``<bdi>`` in the dashboard's cell, left-to-right marks in a terminal (``isolated``, as the
consoles' columns already were). Items without a right-to-left letter are unchanged, but for
an item of Arabic-Indic digits (class AN), which a page's list drew swapped as it drew the
letters (in headless Chromium, ``"٣٤", "٥٦"`` at x 188 and 141)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from fedhh.cli.up import close_demo
from fedhh.v1 import coordinator_pb2 as pb

HEBREW, ARABIC = "\u05e9\u05dc\u05d5\u05dd", "\u0645\u0631\u062d\u0628\u0627"
FSI, PDI, LRM = "\u2068", "\u2069", "\u200e"


def test_the_demo_page_isolates_each_right_to_left_item_of_its_list() -> None:
    said: list[str] = []
    demo = SimpleNamespace(say=said.append, wait_settled=lambda seconds: None,
                           devices=lambda: [], follow=lambda run: None)
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.2,
                          rounds_released=2, rounds=[])
    items = [HEBREW, ARABIC, "apple", f"{HEBREW} 12", "\u0663\u0664", "\u0665\u0666"]
    found = [pb.HeavyHitter(item=item, estimate=40.0, round=1, ended=True) for item in items]
    close_demo(demo, run, SimpleNamespace(heavy_hitters=found))
    assert said[0].endswith(
        f'heavy hitters: ["{FSI}{HEBREW}{PDI}", "{FSI}{ARABIC}{PDI}", "apple", '
        f'"{FSI}{HEBREW} 12{PDI}", "{FSI}\u0663\u0664{PDI}", "{FSI}\u0665\u0666{PDI}"]')


def test_the_dashboard_isolates_the_item_from_its_cut_note() -> None:
    from fedhh_coordinator.dashboard.pages import hits_table
    from fedhh_coordinator.dashboard.results import Hit

    hits = [Hit(rank=1, item="apple", estimate=10.0, std=math.nan, round=1)]
    cut = [Hit(rank=1, item=f"{HEBREW[:3]}…", estimate=5.0, std=math.nan, round=2,
               truncated=True, bits=48)]
    page = str(hits_table("r1", hits, cut))
    assert '<td class="item"><bdi>apple</bdi></td>' in page
    assert f'<td class="item"><bdi>{HEBREW[:3]}…</bdi> <span class="note">(cut at 48' in page


def test_the_cut_deny_warning_isolates_each_item_it_names(
        capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.simulate import warn_cut_deny

    warn_cut_deny([{"item": "long", "bits": 684, "needs_bits": 900, "also_denies": [
        {"item": HEBREW, "users_holding": 0.4}, {"item": ARABIC, "users_holding": 0.1},
        {"item": "plain", "users_holding": None}]}])
    [line] = capsys.readouterr().err.splitlines()
    assert (f", here also {LRM}{HEBREW}{LRM} (40.0% of the users), {LRM}{ARABIC}{LRM} "
            "(10.0% of the users), plain; ") in line
