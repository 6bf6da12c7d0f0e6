"""`fedhh simulate`'s summary says what the rounds found in counts that add up to the heavy
hitters listed (whole items held, truncated codes held, false positives held by no user), the
cut prefixes apart, neither found nor false; the paper's true and false positives follow,
labelled as the paper's output, the deny list included. Before, 'true positives 16' was the
whole summary of a run whose every item was denied (the paper's Algorithm 1 outputs the deny
list), and nothing said what a cut prefix counted as."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

from fedhh.cli.simulate import found_counts
from fedhh.metrics import Truth, whole_items

ITEMS = ["東京", "007", "😀", "café"]


def test_a_run_whose_every_item_is_denied_found_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(56)
    data = tmp_path / "users.jsonl"
    data.write_text("".join(json.dumps([i for i in ITEMS if rng.random() < 0.5] or ["007"])
                            + "\n" for _ in range(2000)), encoding="utf-8")
    deny = tmp_path / "deny.json"
    deny.write_text(json.dumps(ITEMS), encoding="utf-8")
    code, stdout, stderr = run_cli(
        ["simulate", "--dataset", str(data), "--deny-list", str(deny), "--eps-agg", "8",
         "--completion-rounds", "0", "--seed", "3"], capsys)
    assert code == 0, stderr
    # (every user's items denied: no device reports an item, whatever the noise lifts)
    assert "found by the rounds: 0 whole items held by some user, " in stdout
    assert ("the paper's output (what the rounds found, and the deny list's 4 items): "
            "true positives 4, ") in stdout


def test_the_found_rows_split_three_ways() -> None:
    truth = Truth.from_items(np.array([1, 2, 3], np.uint64), np.array([0.5, 0.3, 0.2]),
                             np.array([0.5, 0.3, 0.2]))
    # whole and held; truncated and held; ended and held by none; truncated and held by none
    counts = whole_items(np.array([1, 2, 9, 8], np.uint64),
                         np.array([True, False, True, False]), truth)
    assert counts == {"whole_items_found": 1, "truncated_found": 2, "truncated_held": 1,
                      "found_false_positives": 2}


def test_cut_prefixes_are_neither_found_nor_false() -> None:
    metrics = {"whole_items_found": 0, "truncated_held": 0, "found_false_positives": 2,
               "cut_prefixes": 2}
    assert found_counts(metrics) == (
        "found by the rounds: 0 whole items held by some user, 2 false positives (held by no "
        "user); 2 cut prefixes, neither found nor false (listed apart)")
    assert found_counts({**metrics, "whole_items_found": 1, "truncated_held": 3,
                         "found_false_positives": 1, "cut_prefixes": 1}) == (
        "found by the rounds: 1 whole item held by some user, 3 truncated at the codes' "
        "max_bits held by some user, 1 false positive (held by no user); 1 cut prefix, "
        "neither found nor false (listed apart)")
