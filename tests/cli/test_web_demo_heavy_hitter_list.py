"""The web demo page's closing line lists the heavy hitters as the consoles show them, each
quoted, a quote inside one written \\x22. Before, the list was JSON, which doubled the
backslash of every escape: the item U+202E evil read \\\\u202eevil on the page, which by the
escapes' rule (a backslash of the item's own is doubled) is an item holding a backslash."""

from __future__ import annotations

from types import SimpleNamespace

from fedhh.cli.up import close_demo
from fedhh.v1 import coordinator_pb2 as pb


def test_the_demo_page_lists_the_items_as_the_consoles_show_them() -> None:
    said: list[str] = []
    demo = SimpleNamespace(say=said.append, wait_settled=lambda seconds: None,
                           devices=lambda: [], follow=lambda run: None)
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.2,
                          rounds_released=2, rounds=[])
    items = ["\u202eevil", 'say "hi", bye', "a\\b", "\u05e9\u05dc\u05d5\u05dd"]
    found = [pb.HeavyHitter(item=item, estimate=40.0, round=1, ended=True) for item in items]
    close_demo(demo, run, SimpleNamespace(heavy_hitters=found))
    assert said[0].endswith(
        'heavy hitters: ["\\u202eevil", "say \\x22hi\\x22, bye", "a\\\\b", '
        '"\u2068\u05e9\u05dc\u05d5\u05dd\u2069"]')  # (page_isolated)
