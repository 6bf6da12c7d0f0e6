"""A whole item that ends in ``…`` (text its writer cut: ``wait…``) shows that ``…`` escaped,
so that it never reads as a cut item, whose ``…`` is the cut's mark: in a heavy-hitter list
that holds truncated items both showed ``wait…``, and the console's note said that an item
ending in ``…`` was cut (fedhh.codec.shown)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec.codec import Decoded
from fedhh.codec.shown import printable


@pytest.mark.parametrize(("item", "shown"), [
    ("wait\u2026", "wait\\u2026"), ("\u2026", "\\u2026"),
    ("\u6771\u4eac\u2026", "\u6771\u4eac\\u2026"),
    ("a\u2026b", "a\u2026b"), ("\u2026a", "\u2026a"),  # (not at the end: no cut's mark)
    ("wait\u2026 ", "wait\u2026\\x20"),
])
def test_a_final_ellipsis_of_a_whole_item_is_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


def test_a_cut_item_keeps_its_mark() -> None:
    cut = Decoded("wait", ended=False, possible=True, trailing_bits=3).shown_cut
    assert printable(cut, cut=True) == "wait\u2026"
    own = Decoded("wait\u2026", ended=False, possible=True, trailing_bits=0).shown_cut
    assert printable(own, cut=True) == "wait\u2026\u2026"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(st.sampled_from(list("ab\u2026 \\x")), min_size=1, max_size=8),
       st.text(st.sampled_from(list("ab\u2026 \\x")), max_size=8))
def test_a_whole_item_never_shows_as_a_cut_one(whole: str, prefix: str) -> None:
    cut = Decoded(prefix, ended=False, possible=True, trailing_bits=1).shown_cut
    assert printable(whole) != printable(cut, cut=True)


def test_simulate_shows_whole_and_cut_items_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(2)
    words = ["wait\u2026", "https://example.com/a/long/path", "plain"]
    lines = [" ".join(rng.choice(words, size=2, replace=False)) for _ in range(3000)]
    data = tmp_path / "users.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    code, stdout, _ = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "8",
                               "--dim-limit", "1e6", "--seed", "3", "--completion-rounds", "0",
                               "--max-bits", "60", "--json", str(out)], capsys)
    assert code == 0
    hitters = {h["item"]: h for h in json.loads(out.read_text(encoding="utf-8"))["heavy_hitters"]}
    assert hitters["wait\u2026"]["ended"]
    [cut] = [h for h in hitters.values() if h["truncated"]]
    rows = stdout.splitlines()
    whole = hitters["wait\u2026"]
    assert any(re.fullmatch(rf"\s*\d+\s+wait\\u2026\s+{whole['estimate']:,.0f}\s+"
                            rf"{whole['std']:,.0f}\s+{whole['round']}", row)
               for row in rows), stdout
    assert any(cut["item"] in row for row in rows) and cut["item"].endswith("\u2026")
    assert "was truncated at 60 bits" in stdout
