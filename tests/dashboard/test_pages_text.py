"""What the dashboard's texts say (issue 28): a finished run that needed fewer rounds says so,
and every time carries its zone."""

from __future__ import annotations

import re

from fedhh_coordinator.dashboard.pages import rounds_text, when
from fedhh_coordinator.dashboard.views import RunLine


def line(state: str, released: int, rounds: int = 4) -> RunLine:
    return RunLine("r1", state, released, rounds, "", 0.5, 1.0, 1e-6, 0.0, 1.0, "")


def test_a_run_whose_tree_finished_early_says_the_rest_were_not_needed() -> None:
    """Before: "3 of 4 rounds" for a finished run, as if one were missing."""
    assert rounds_text(line("done", 3)) == (
        "3 of 4 rounds (every item was complete: the rest were not needed)")
    assert rounds_text(line("done", 4)) == "4 of 4 rounds"
    assert rounds_text(line("running", 3)) == "3 of 4 rounds"
    assert rounds_text(line("failed", 1)) == "1 of 4 rounds"


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
    hits = heavy_hitters(SimpleNamespace(tree=tree, state=state), [])  # type: ignore[arg-type]
    assert [(h.item, h.truncated, h.bits) for h in hits] == [
        ("tea", False, 0), ("intern…", True, 30)]
    page = hits_table("r1", hits)
    assert "cut at 30 bits" in page and page.count("cut at") == 1
    assert _hit_json(hits[1])["truncated"] is True and _hit_json(hits[1])["bits"] == 30
    assert _hit_json(hits[0])["truncated"] is False and "bits" not in _hit_json(hits[0])
