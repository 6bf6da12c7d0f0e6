"""`fedhh simulate`'s recall line over a dataset of fewer items than its largest top k gives
each top once and says which tops there are none of: over 10 items it printed "top-10 1.00,
top-100 1.00, top-1000 1.00, top-10000 1.00", the top 10's figure four times."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

ITEMS = ["👍🏽", "東京", "https://example.com/a?b=1", "007", "a@b.example", "+44 20 7946 0000",
         "new york", "שלום", "١٢٣", "🇯🇵"]


def test_recall_over_ten_items_is_the_top_tens_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(5)
    users = [json.dumps([item for item in ITEMS if rng.random() < 0.6] or [ITEMS[0]])
             for _ in range(2000)]
    data = tmp_path / "users.jsonl"
    data.write_text("\n".join(users) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    code, stdout, stderr = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "16",
                                    "--dim-limit", "1e6", "--seed", "2", "--json", str(out)],
                                   capsys)
    assert code == 0, stderr
    metrics = json.loads(out.read_text(encoding="utf-8"))["metrics"]
    assert metrics["held_items"] == len(ITEMS)
    # (every top keeps its key, null past the items, and says why: a JSON reader of "1000"
    # met a KeyError)
    assert metrics["weighted"]["recall_at"] | {"10": None} == {
        "10": None, "100": None, "1000": None, "10000": None}
    assert metrics["recall_at_null"] == ("the users hold 10 items, every one in the top 10: "
                                         "there is no top 100, 1,000 or 10,000")
    recall = metrics["weighted"]["recall_at"]["10"]
    lines = [line for line in stdout.splitlines() if line.startswith("its recall")]
    assert lines == [f"its recall (weighted ranking): top-10 {recall:.2f} (the users hold 10 "
                     "items: there is no top 100, 1,000 or 10,000)"]
