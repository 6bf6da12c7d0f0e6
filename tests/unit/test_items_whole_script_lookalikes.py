"""An item all of whose letters are Cyrillic (or Greek...) ones that look like Latin letters
(``сосоа``) showed as it is, so a list that also held ``cocoa`` showed two rows that read alike,
on the consoles, the dashboard's page and its CSV; so did Persian digits beside the Arabic-Indic
ones they draw as (``۱۲۳``, ``١٢٣``), and a URL whose slash is a division slash
(``http://a.com∕x``) beside the one with ``/``; and a cut prefix ``сос\\xd0…`` read as the
parent of ``cocoa``, in the other list, whose text it does not begin. Now such rows show
their lookalike letters escaped (``fedhh.codec.shown.printable_rows``); a row that reads as no
other's shows as before, so Russian or Greek text is not mangled."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedhh.codec.shown import printable, printable_rows

COCOA_CYRILLIC = "\u0441\u043e\u0441\u043e\u0430"  # сосоа
ESCAPED = "\\u0441\\u043e\\u0441\\u043e\\u0430"
CUT = "\u0441\u043e\u0441\\xd0\u27e8+1 bit\u27e9\u2026"  # сос\xd0⟨+1 bit⟩…, as shown_cut writes it
CUT_ESCAPED = "\\u0441\\u043e\\u0441\\xd0\u27e8+1 bit\u27e9\u2026"


@pytest.mark.parametrize(("rows", "shown"), [
    ([("cocoa", False), (COCOA_CYRILLIC, False)], ["cocoa", ESCAPED]),
    ([(COCOA_CYRILLIC, False), ("cocoa", False)], [ESCAPED, "cocoa"]),
    ([("a", False), ("\u0430", False)], ["a", "\\u0430"]),  # the Russian conjunction а
    # Greek against Cyrillic, no Latin: both escaped, each its own way
    ([("\u039a\u039f", False), ("\u041a\u041e", False)], ["\\u039a\\u039f", "\\u041a\\u041e"]),
    # a fullwidth item against the plain one (a variant in a plain item was escaped already)
    ([("\uff50\uff41\uff59", False), ("pay", False)], ["\\uff50\\uff41\\uff59", "pay"]),
    # Persian digits that draw as the Arabic-Indic ones (UTS #39: four too), and both ones
    # as the Latin l: what reads as other text is escaped, the prototypes ٢, ٣, ٤ are not
    ([("\u0661\u0662\u0663", False), ("\u06f1\u06f2\u06f3", False),
      ("\u0661\u0662\u0663\u0664", False), ("\u06f1\u06f2\u06f3\u06f4", False)],
     ["\\u0661\u0662\u0663", "\\u06f1\\u06f2\\u06f3", "\\u0661\u0662\u0663\u0664",
      "\\u06f1\\u06f2\\u06f3\\u06f4"]),
    # punctuation that draws as ASCII's: a URL's division slash, a hyphen
    ([("http://a.com/x", False), ("http://a.com\u2215x", False), ("e-mail", False),
      ("e\u2010mail", False), ("1\u20132", False)],
     ["http://a.com/x", "http://a.com\\u2215x", "e-mail", "e\\u2010mail", "1\u20132"]),
    # Latin letters of IPA that draw as plain ones: all Latin, so no mixed-script escape
    ([("paypal", False), ("p\u0251ypal", False), ("\u0261o", False), ("go", False)],
     ["paypal", "p\\u0251ypal", "\\u0261o", "go"]),
    # font and width variants of digits and symbols, Roman numerals, beside their NFKC forms'
    # rows; alone, or beside other rows, as they are; superscripts and circled digits draw
    # unlike their bases, and a whole item's ellipsis is escaped by its own rule
    ([("123", False), ("\uff11\uff12\uff13", False), ("\U0001d7f7\U0001d7f8\U0001d7f9", False),
      ("XII", False), ("\u216b", False), ("\u2161", False), ("\u00b9", False),
      ("\u2460", False), ("a@b.com", False), ("a\uff20b\uff0ecom", False),
      ("\uff14\uff15", False), ("x...", False), ("x\u2026", False)],
     ["123", "\\uff11\\uff12\\uff13", "\\U0001d7f7\\U0001d7f8\\U0001d7f9", "XII", "\\u216b",
      "\u2161", "\u00b9", "\u2460", "a@b.com", "a\\uff20b\\uff0ecom", "\uff14\uff15",
      "x...", "x\\u2026"]),
    ([("\u2160\u2160", False), ("II", False)], ["\\u2160\\u2160", "II"]),
    # a cut prefix of a mathematical digit read as the parent of 123
    ([("\U0001d7f7\\xf0\\x9d\\x9f\u2026", True), ("123", False)],
     ["\\U0001d7f7\\xf0\\x9d\\x9f\u2026", "123"]),
    # cut prefixes, whose text is already written with escapes
    ([("\u0441\u043e\u0441\u043e\u27e8+2 bits\u27e9\u2026", True),
      ("coco\u27e8+2 bits\u27e9\u2026", True)],
     ["\\u0441\\u043e\\u0441\\u043e\u27e8+2 bits\u27e9\u2026", "coco\u27e8+2 bits\u27e9\u2026"]),
])
def test_rows_that_read_alike_show_their_lookalike_letters_escaped(
        rows: list[tuple[str, bool]], shown: list[str]) -> None:
    assert printable_rows(rows) == shown
    assert len(set(shown)) == len(shown)


@pytest.mark.parametrize(("rows", "context", "shown"), [
    ([(CUT, True)], [("cocoa", False)], [CUT_ESCAPED]),
    ([("cocoa", False)], [(CUT, True)], ["cocoa"]),
    ([(CUT, True), ("cocoa", False)], [], [CUT_ESCAPED, "cocoa"]),
    # a cut prefix of the row's own text, or of one it does not read as, is left as it is
    ([(CUT, True), (COCOA_CYRILLIC, False)], [], [CUT, COCOA_CYRILLIC]),
    ([(CUT, True)], [("coal", False)], [CUT]),
    ([("coc\\xd0\u2026", True)], [("cocoa", False)], ["coc\\xd0\u2026"]),
])
def test_a_cut_prefix_that_reads_as_another_rows_parent_is_escaped(
        rows: list[tuple[str, bool]], context: list[tuple[str, bool]], shown: list[str]) -> None:
    assert printable_rows(rows, context) == shown


def test_rows_that_read_apart_show_as_printable_shows_them() -> None:
    """Russian and Greek words, and a mixed item already told apart by its own escapes."""
    rows = [(COCOA_CYRILLIC, False), ("\u0445\u043e\u0440", False),  # сосоа, хор
            ("\u041c\u043e\u0441\u043a\u0432\u0430", False),
            ("\u0391\u03b8\u03ae\u03bd\u03b1", False),
            ("\u0440\u0430\u0443\u0440\u0430l", False), ("paypal", False), ("choir", False),
            ("\u6771\u4eac", False), ("", False)]
    assert printable_rows(rows) == [printable(text, cut) for text, cut in rows]
    # a row shown twice (one item, or a whole item and a cut prefix of one text) is not changed
    assert printable_rows([(COCOA_CYRILLIC, False), (COCOA_CYRILLIC, True)]) == [
        COCOA_CYRILLIC, COCOA_CYRILLIC]


def test_the_simulate_tables_tell_them_apart(capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.simulate import _hitters_table

    hit = {"estimate": 10.0, "std": 1.0, "round": 1, "truncated": False}
    _hitters_table([{**hit, "item": "cocoa"}, {**hit, "item": COCOA_CYRILLIC}], 20, "")
    out = capsys.readouterr().out
    assert ESCAPED in out and COCOA_CYRILLIC not in out
    _hitters_table([{**hit, "item": CUT, "truncated": True, "bits": 55}], 20, "",
                   [("cocoa", False)])
    assert CUT_ESCAPED in capsys.readouterr().out


def test_the_up_report_tells_them_apart(capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.up import _print_results
    from fedhh.v1 import coordinator_pb2 as pb

    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=4.0,
                          rounds_released=1, config=pb.RunConfig(eps_agg=2.0, delta=1e-6),
                          rounds=[])
    hits = [pb.HeavyHitter(item=item, estimate=97.0, round=1, ended=True)
            for item in ("cocoa", COCOA_CYRILLIC)]
    cut = pb.HeavyHitter(item=CUT, estimate=85.0, round=1, truncated=True, bits=55)
    _print_results(run, SimpleNamespace(heavy_hitters=hits[:1], cut_prefixes=[cut]))
    assert CUT_ESCAPED in capsys.readouterr().out
    _print_results(run, SimpleNamespace(heavy_hitters=hits, cut_prefixes=[]))
    out = capsys.readouterr().out
    assert ESCAPED in out and COCOA_CYRILLIC not in out


def test_the_dashboard_page_and_csv_tell_them_apart() -> None:
    from fedhh_coordinator.dashboard.pages import hits_table
    from fedhh_coordinator.dashboard.results import Hit
    from fedhh_coordinator.dashboard.server import hits_csv

    hits = [Hit(rank=i + 1, item=item, estimate=10.0, std=math.nan, round=1)
            for i, item in enumerate(("cocoa", COCOA_CYRILLIC))]
    page = str(hits_table("r1", hits))
    assert f'data-item="{COCOA_CYRILLIC}"' in page  # (the filter's copy stays exact)
    assert f'<td class="item"><bdi>{ESCAPED}</bdi></td>' in page
    cells = [row["item"] for row in csv.DictReader(io.StringIO(hits_csv(hits, [])))]
    assert cells == ["cocoa", ESCAPED]
    # a cut prefix in the list below the heavy hitters, read against them
    cut = [Hit(rank=1, item=CUT, estimate=5.0, std=math.nan, round=2, truncated=True, bits=55)]
    assert (f'<td class="item"><bdi>{CUT_ESCAPED}</bdi> <span'
            in str(hits_table("r1", hits[:1], cut)))
    cells = [row["item"] for row in csv.DictReader(io.StringIO(hits_csv(hits[:1], cut)))]
    assert cells == ["cocoa", CUT_ESCAPED]


def test_data_inspect_tells_them_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.main import main

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "users.txt"
    source.write_text(f"cocoa\n{COCOA_CYRILLIC}\n", encoding="utf-8")
    assert main(["data", "inspect", str(source)]) == 0
    out = capsys.readouterr().out
    assert ESCAPED in out and COCOA_CYRILLIC not in out


def _printable_rows_brute_force(rows: list[tuple[str, bool]],
                                context: list[tuple[str, bool]]) -> list[str]:
    """The check ``printable_rows`` makes, written as its definition: every pair of rows
    compared (quadratic), for the randomized test below (bc23b13 replaced the pairwise scan by
    two binary searches)."""
    from fedhh.codec.shown import _cut_tail, _reading

    every = [*rows, *context]
    shown = [printable(text, cut) for text, cut in every]
    reading = [_reading(text) for text in shown]
    flagged = {i for i in range(len(every)) for j in range(len(every))
               if reading[i] == reading[j] and shown[i] != shown[j]}
    for i, (text, cut) in enumerate(every):
        body = printable(text[:_cut_tail(text)], cut=True) if cut else ""
        if not body:
            continue
        for j in range(len(every)):
            if reading[j].startswith(_reading(body)) and not shown[j].startswith(body):
                flagged.update((i, j))
    return [printable(text, cut, confusable=True) if i in flagged else shown[i]
            for i, (text, cut) in enumerate(rows)]


def test_printable_rows_flags_exactly_the_rows_the_brute_force_check_does() -> None:
    """Seeded random lists of whole items and cut prefixes over a small alphabet of Latin
    letters and their lookalikes (Cyrillic, Greek, fullwidth, a division slash), a digit and
    a Roman numeral and theirs (fullwidth; the letter I), so that many
    rows read alike or read as another's beginning; deterministic, no false failures."""
    import random

    rng = random.Random(20261204)
    letters = ["c", "o", "a", "p", "/", "\u0441", "\u043e", "\u0430", "\u0440", "\u03bf",
               "\uff43", "\u2215", "\u0161", "1", "\uff11", "\u2160", "I"]
    tails = ["\u2026", "\u27e8+1 bit\u27e9\u2026", "\\xd0\u2026", "\\xd0\u27e8+3 bits\u27e9\u2026"]
    flagged_some = 0
    for _ in range(200):
        every = []
        for _ in range(rng.randint(1, 14)):
            text = "".join(rng.choice(letters) for _ in range(rng.randint(0, 5)))
            cut = rng.random() < 0.5
            every.append((text + rng.choice(tails) if cut else text, cut))
        split = rng.randint(0, len(every))
        rows, context = every[:split], every[split:]
        expected = _printable_rows_brute_force(rows, context)
        assert printable_rows(rows, context) == expected, (rows, context)
        flagged_some += expected != [printable(text, cut) for text, cut in rows]
    assert flagged_some > 20  # the lists did hold rows that read alike
