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

from fedhh.cli.simulate import found_counts, privacy_line
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


def test_a_listed_item_no_user_holds_is_marked_false_positive(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(5)
    fruit = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]
    data = tmp_path / "u.jsonl"
    data.write_text("".join(json.dumps([str(x) for x in rng.choice(
        fruit, size=2, replace=False, p=[.3, .2, .15, .12, .1, .08, .05])]) + "\n"
        for _ in range(3000)), encoding="utf-8")
    out = tmp_path / "out.json"
    # (seed 1: the noise lifts one item no user holds, "applims", to the list)
    code, stdout, stderr = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "1",
                                    "--seed", "1", "--json", str(out)], capsys)
    assert code == 0, stderr
    hitters = json.loads(out.read_text(encoding="utf-8"))["heavy_hitters"]
    marked = {h["item"] for h in hitters if h["false_positive"]}
    assert marked and not marked & set(fruit)
    assert {h["item"] for h in hitters} - marked <= set(fruit)
    rows = [line for line in stdout.splitlines()
            if line.endswith("false positive (held by no user)") and line[:3].strip().isdigit()]
    assert len(rows) == len(marked)
    assert all(any(f" {item} " in row for item in marked) for row in rows)
    assert "1 false positive (held by no user)" in stdout


def test_the_privacy_line_says_each_figure_once() -> None:
    privacy = {"eps_agg": 1, "delta": 1e-06, "charged_rounds": 11, "sampling_rate": 1,
               "eps_local": 4.398, "eps_agg_target": 1, "eps_agg_achieved": 0.9996,
               "rounds": 11, "num_devices": 3000, "method": "sum", "tolerance": 0.001,
               "evaluations": 6, "conditions_verified": True, "completion_rounds": "7 of 32",
               "eps_agg_spent": 0.6673, "rounds_spent": 2, "round_eps_local": [1.0]}
    assert privacy_line(privacy) == (
        "privacy: eps_agg 1, 0.9996 achieved, delta 1e-06, over 11 charged rounds; spent "
        "0.6673 in the 2 rounds run; eps_local 4.398 on 3000 devices, sampling rate 1; "
        "accounting sum, tolerance 0.001, 6 evaluations, conditions verified; completion "
        "rounds 7 of 32")
    # (an explicit --eps-local: eps_agg is what it spends, the target said apart; another
    # algorithm's figures follow, named)
    assert privacy_line({"eps_agg": 0.4465, "eps_agg_target": 1, "delta": 1e-06,
                         "charged_rounds": 4, "rounds": 7, "noise_scale": 7.998}) == (
        "privacy: eps_agg 0.4465 (what --eps-local spends; --eps-agg asked 1), delta 1e-06, "
        "over 4 charged rounds (7 composed); noise scale 7.998")
