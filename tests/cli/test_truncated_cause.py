"""Every truncated entry of `fedhh simulate --json` says why, as a cut prefix does: the
baselines (TrieHH, TrieHH++, central DP) and runs without completion rounds list items cut at
the code's width among the heavy hitters; before, those entries carried no ``cause`` while
OptPrefixTree's ``cut_prefixes`` did."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedhh.cli.main import main

LONG = "https://example.com/" + "abcdefghij" * 4  # past 60 bits
WORDS = ["2017", "für", "👍🏽", "alice@example.com", LONG]
CUT_KEYS = {"item", "estimate", "run", "round", "code", "ended", "truncated", "bits", "std",
            "cause", "prefix_bytes", "starting_so"}


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(2)
    path = tmp_path_factory.mktemp("cause") / "users.jsonl"
    path.write_text("".join(json.dumps(list(rng.choice(WORDS, size=2, replace=False)),
                                       ensure_ascii=False) + "\n" for _ in range(3000)),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("flags", [
    ["--algorithm", "triehh", "--eps-agg", "8"],
    ["--algorithm", "triehh++", "--eps-agg", "2"],
    ["--algorithm", "central-laplace", "--eps-agg", "8"],
    ["--algorithm", "central-gaussian", "--eps-agg", "8"],
    ["--completion-rounds", "0", "--eps-agg", "8"],
])
def test_a_truncated_item_carries_its_cause(users: Path, tmp_path: Path, flags: list[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r.json"
    assert main(["simulate", "--dataset", str(users), *flags, "--max-bits", "60", "--seed",
                 "1", "--quiet", "--json", str(out)]) == 0
    payload = json.loads(out.read_text(encoding="utf-8"))
    truncated = [h for h in payload["heavy_hitters"] if h["truncated"]]
    assert truncated, payload["heavy_hitters"]
    for entry in truncated:
        # (``false_positive``: simulate marks every listed item no user holds, 328c2366)
        assert set(entry) - {"note", "false_positive"} == CUT_KEYS, entry
        assert entry["false_positive"] is False, entry
        assert entry["cause"] == "no rounds left" and entry["bits"] == 60
    assert all("cause" not in h for h in payload["heavy_hitters"] if not h["truncated"])
