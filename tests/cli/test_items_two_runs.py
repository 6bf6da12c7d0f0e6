"""``fedhh simulate --two-runs`` on the console: the first run's heavy hitters (the second
run's deny list, and most of the output) are listed, apart from the second run's (each run's
rounds count from 1); "whole items held by some user" counts both runs; a truncated item's
note names --two-runs as what rules the completion rounds out (--completion-rounds, which the
note pointed to, is refused with it); the first run's items carry their ``std`` in the
JSON. Before, the console showed "0 heavy hitters discovered (+33 found by the first run,
listed in --json's earlier_runs)", an empty table, and "whole items held by some user 0"
beside "true positives 32"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

# (short items, found whole in 60 bits; a URL longer than the codes, truncated)
SHORT = ["👍🏽", "東京", "007", "שלום", "café"]
LONG = "https://example.com/a/long/path?query=1"


def test_two_runs_lists_the_first_runs_items(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(36)
    items = [*SHORT, LONG]
    users = [json.dumps([item for item in items if rng.random() < 0.5] or ["007"])
             for _ in range(3000)]
    data = tmp_path / "users.jsonl"
    data.write_text("\n".join(users) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    code, stdout, stderr = run_cli(
        ["simulate", "--dataset", str(data), "--eps-agg", "16", "--dim-limit", "1e6",
         "--seed", "2", "--two-runs", "--json", str(out)], capsys)
    assert code == 0, stderr
    payload = json.loads(out.read_text(encoding="utf-8"))
    earlier = payload["earlier_runs"]
    whole = [h for h in earlier + payload["heavy_hitters"] if h["ended"]
             and h["item"] in items]
    # Each of the six items is held by about half of 3,000 users at eps_agg 16: the first run
    # finds it (its estimate ~15 standard deviations above the threshold); the asserts below
    # need only one of the short ones found whole and the URL found truncated.
    assert whole and earlier
    assert all(h["std"] > 0 for h in earlier)  # (as the second run's: its round's randomizer)
    assert any(h["truncated"] and LONG.startswith(h["item"].removesuffix("…").split("⟨+")[0])
               for h in earlier)
    lines = stdout.splitlines()
    heading = f"{len(earlier)} heavy hitters found by the first run (the second run's deny list)"
    assert heading in lines
    second = next(i for i, line in enumerate(lines)
                  if line.startswith(f"{len(payload['heavy_hitters'])} heavy hitters "
                                     "discovered by the second run"))
    first_list = "\n".join(lines[lines.index(heading):second])
    for hitter in whole:
        if hitter in earlier:
            assert hitter["item"] in first_list  # (these items print as they are)
    assert "do not run with --two-runs" in first_list
    assert payload["metrics"]["whole_items_found"] == len(
        {h["item"] for h in whole})
    assert f"found by the rounds: {len(whole)} whole items held by some user" in stdout
