"""What the dashboard's texts say (issue 28): a finished run that needed fewer rounds says so,
and every time carries its zone."""

from __future__ import annotations

import re
from types import SimpleNamespace

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard.pages import rounds_text, when
from fedhh_coordinator.dashboard.views import RunLine

# (a run whose eps_local the fake does not know: a cut row the rounds ran out on reads "no
# rounds left", fedhh.server.causes.ran_out_cause)
UNKNOWN_BUDGET = {"config": RunConfig(), "ledger": SimpleNamespace(eps_local=None)}


def line(state: str, released: int, rounds: int = 4) -> RunLine:
    return RunLine("r1", state, released, rounds, "", 0.5, 1.0, 1e-6, 0.0, 1.0, "")


def test_a_run_whose_tree_finished_early_says_the_rest_were_not_needed() -> None:
    """Before: "3 of 4 rounds" for a finished run, as if one were missing."""
    assert rounds_text(line("done", 3)) == (
        "3 of 4 rounds (every item was complete: the rest were not needed)")
    assert rounds_text(line("done", 4)) == "4 of 4 rounds"
    assert rounds_text(line("running", 3)) == "3 of 4 rounds"
    assert rounds_text(line("failed", 1)) == "1 of 4 rounds"


def test_a_run_whose_last_round_kept_nothing_does_not_say_every_item_was_complete() -> None:
    """Before: a run whose first completion round kept no prefix, its heavy prefixes listed
    as cut below, read "5 of 11 rounds (every item was complete: ...)" (a networked run of
    URLs and emoji, 500 devices)."""
    ended = RunLine("r1", "done", 5, 11, "", 3.5, 4.0, 1e-6, 0.0, 1.0, "", emptied=5)
    assert rounds_text(ended) == ("5 of 11 rounds (round 5 kept no prefix, so none was left "
                                  "to extend: the rest were not needed)")


def test_times_carry_their_zone() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Za-z+\-0-9]+", when(1.8e9))
    assert when(None) == "–"


def test_a_truncated_heavy_hitter_is_marked_cut_everywhere_it_is_shown() -> None:
    """An item cut at the code's width (no completion rounds) stands for every item starting
    with its text: the page says so, and the downloads carry the flag and the bits (before:
    the dashboard showed it as any other item)."""
    from types import SimpleNamespace

    from fedhh.codec import Codec
    from fedhh.server.mechanisms import LocalRandomizer, TailKind
    from fedhh.server.prefixtree import Found, PrefixTree, TreeConfig, TreeState
    from fedhh_coordinator.dashboard.pages import hits_table
    from fedhh_coordinator.dashboard.results import heavy_hitters
    from fedhh_coordinator.dashboard.server import _hit_json

    codec = Codec("5bit", 30)
    tree = PrefixTree(TreeConfig(rounds=2, dim_limit=2**16), codec,
                      LocalRandomizer(3.0, TailKind.BINOMIAL))
    whole, cut = codec.encode_many(["tea", "internationalisation"]).codes.tolist()
    state = TreeState(discovered=(Found(int(whole), 40.0, 1), Found(int(cut), 30.0, 2)))
    hits = heavy_hitters(SimpleNamespace(tree=tree, state=state, **UNKNOWN_BUDGET), [])  # type: ignore[arg-type]
    assert [(h.item, h.truncated, h.bits) for h in hits] == [
        ("tea", False, 0), ("intern…", True, 30)]
    page = hits_table("r1", hits)
    assert "cut at 30 bits" in page and page.count("cut at") == 1
    assert _hit_json(hits[1])["truncated"] is True and _hit_json(hits[1])["bits"] == 30
    assert _hit_json(hits[0])["truncated"] is False and "bits" not in _hit_json(hits[0])


def test_cut_prefixes_are_listed_apart_and_hidden_characters_are_escaped() -> None:
    """Before: the heavy prefixes the completion rounds could not complete (the heaviest
    results of a run of long items) were on the console and in GetResults but not on the
    dashboard; and an item holding U+202E showed reversed there (``\u202eevil`` read "live"),
    one holding ESC recoloured a terminal that printed the CSV."""
    from types import SimpleNamespace

    from fedhh.codec import Codec
    from fedhh.codec import codes as cw
    from fedhh.server.mechanisms import LocalRandomizer, TailKind
    from fedhh.server.prefixtree import Found, PrefixTree, TreeConfig, TreeState
    from fedhh_coordinator.dashboard.pages import hits_table
    from fedhh_coordinator.dashboard.results import cut_prefixes, heavy_hitters
    from fedhh_coordinator.dashboard.server import hits_csv

    codec = Codec.from_spec("unicode", 200)
    hidden, esc, long_url = cw.to_ints(codec.encode_many(
        ["\u202eevil", "red\x1b[31m", "https://www.example.org/alphabet"]).codes)
    prefix_bits = 60
    cut_code = int(long_url) >> (200 - prefix_bits) << (200 - prefix_bits)
    tree = PrefixTree(TreeConfig(rounds=13, dim_limit=2**16), codec,
                      LocalRandomizer(3.0, TailKind.BINOMIAL))
    state = TreeState(discovered=(Found(int(hidden), 40.0, 1), Found(int(esc), 35.0, 1),
                                  Found(cut_code, 300.0, 2, bits=prefix_bits)))
    parts = SimpleNamespace(tree=tree, state=state, **UNKNOWN_BUDGET)
    hits = heavy_hitters(parts, [])  # type: ignore[arg-type]
    cut = cut_prefixes(parts, [])  # type: ignore[arg-type]
    assert [h.item for h in hits] == ["\u202eevil", "red\x1b[31m"]
    assert len(cut) == 1 and cut[0].truncated and cut[0].bits == prefix_bits
    assert cut[0].item.startswith("https://")
    page = hits_table("r1", hits, cut)
    assert "Cut prefixes" in page and "1 cut prefixes" in page and "2 heavy hitters" in page
    # (the order is the round's, then the estimate's: the page says so, not "Rank")
    assert "By the round that found them, then by estimate" in page and "Rank" not in page
    assert "\\u202eevil" in page and "red\\x1b[31m" in page
    shown = re.sub(r'data-item="[^"]*"', "", page)  # (the filter's copy stays exact)
    assert "\u202e" not in shown and "\x1b" not in shown
    rows = hits_csv(hits, cut).splitlines()
    assert rows[0].endswith(",truncated_at_bits,prefix_bytes,cause,kind,note,run_id,run_state")
    assert rows[1].startswith("1,\\u202eevil,") and rows[1].endswith(",heavy hitter,,,done")
    assert rows[3].startswith("1,https://") and rows[3].endswith(
        f",{prefix_bits},{cut[0].prefix_bytes},{cut[0].cause},cut prefix,,,done")
    assert cut[0].prefix_bytes >= len(cut[0].text.encode("utf-8")) > 0
    assert "\x1b" not in "".join(rows) and "\u202e" not in "".join(rows)


def test_a_deny_list_shows_each_item_apart_even_one_holding_a_comma_and_a_space() -> None:
    """Before: the items were joined with ", ", so the one item "a, b" read as "a" and "b"
    (items with spaces: docs/datasets.md)."""
    from types import SimpleNamespace

    from fedhh.config import RunConfig
    from fedhh_coordinator.dashboard.pages import run_head

    detail = SimpleNamespace(line=line("done", 4), config=RunConfig(), eps_local=1.0,
                             deny=("a, b", "c", " new york"))
    page = str(run_head(detail))  # type: ignore[arg-type]
    assert re.findall(r'<code class="listed" dir="auto">([^<]*)</code>', page) == [
        "a, b", "c", r"\x20new york"]


def test_deny_list_items_are_isolated_for_right_to_left_text() -> None:
    """Hebrew or Arabic deny-list items on one line ran into each other (the bidirectional
    algorithm reorders a line across inline elements and the spaces between them): each
    item's element has dir="auto", which isolates it (HTML's bidi isolation) and takes its
    direction from its own first letter."""
    from types import SimpleNamespace

    from fedhh.config import RunConfig
    from fedhh_coordinator.dashboard.pages import run_head

    detail = SimpleNamespace(line=line("done", 4), config=RunConfig(), eps_local=1.0,
                             deny=("שלום", "abc", "مرحبا"))
    page = str(run_head(detail))  # type: ignore[arg-type]
    cells = re.findall(r'<code ([^>]*)>([^<]*)</code>', page)
    assert cells == [('class="listed" dir="auto"', item) for item in ("שלום", "abc", "مرحبا")]
