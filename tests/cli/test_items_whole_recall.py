"""``whole_recall_at`` counts a deny-listed item (and, with --two-runs, what the first run found
whole) as found, as ``recall_at`` does: denied, it cannot be found again (a deny-list item
longer than the codes, known by a prefix alone, does not count). Before, a deny list of
heavy items lowered it by their share of the top k (the deny list of a probe: 0.84 against
recall_at's 1.0 at the same run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

ITEMS = ["👍🏽", "東京", "https://example.com/a?b=1", "שלום", "007", "new york"]


@pytest.mark.parametrize("extra", [[], ["--two-runs"]])
def test_denied_items_count_as_found_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, extra: list[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(3)
    users = [json.dumps([item for item in ITEMS if rng.random() < 0.5] or ["007"])
             for _ in range(3000)]
    data = tmp_path / "users.jsonl"
    data.write_text("\n".join(users) + "\n", encoding="utf-8")
    deny = tmp_path / "deny.txt"
    deny.write_text("👍🏽\nhttps://example.com/a?b=1\n", encoding="utf-8")
    out = tmp_path / "r.json"
    code, _, stderr = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "16",
                               "--dim-limit", "1e6", "--seed", "2", "--quiet", "--deny-list",
                               str(deny), "--json", str(out), *extra], capsys)
    assert code == 0, stderr
    payload = json.loads(out.read_text(encoding="utf-8"))
    found = {h["item"] for h in payload["heavy_hitters"] if h["ended"]}
    found |= {h["item"] for h in payload["earlier_runs"] if h["ended"]}
    # (a deny-list item longer than the codes is known by a prefix only, which may stand for
    # other items too: not whole; with --two-runs, which has no completion rounds, the URL)
    cut = {entry["item"] for entry in payload["deny_list_cut"]}
    known = (found | set(payload["deny_list"]) - cut) & set(ITEMS)
    assert len(known) >= 4  # (the emoji denied, and some found)
    assert payload["metrics"]["whole_recall_at"] == {"50": len(known) / len(ITEMS),
                                                     "100": None, "1000": None}
    # (every top keeps its key, null past the 6 items, with the reason: a JSON reader of
    # "100" met a KeyError)
    assert payload["metrics"]["whole_recall_at_null"] == (
        "the users hold 6 items, every one in the top 50: there is no top 100 or 1,000")
