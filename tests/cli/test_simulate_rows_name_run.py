"""`fedhh simulate --json`: every row of ``heavy_hitters``, ``cut_prefixes`` and
``earlier_runs`` names the run that found it (``run``), as it names its round, which counts
from 1 again in the second run of --two-runs (before, only the list a row sat in said which
run: a row taken out of it, or the lists joined, did not); a single run's rows say run 1."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

ITEMS = ["👍🏽", "東京", "007", "-1e-7", "a+b@example.com", "https://例え.jp/?q=%20"]


def _simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    rng = np.random.default_rng(45)
    users = [json.dumps([item for item in ITEMS if rng.random() < 0.5] or ["007"])
             for _ in range(400)]
    data = tmp_path / "users.jsonl"
    data.write_text("\n".join(users) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    code, _, stderr = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "16",
                               "--dim-limit", "1e5", "--rounds", "5", "--seed", "3", "--quiet",
                               "--json", str(out), *extra], capsys)
    assert code == 0, stderr
    return json.loads(out.read_text(encoding="utf-8"))


def test_each_row_names_its_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    two = _simulate(tmp_path, capsys, "--two-runs")
    assert two["earlier_runs"]  # (the first run finds the items: the second's deny list)
    assert {h["run"] for h in two["earlier_runs"]} == {1}
    assert {h["run"] for h in two["heavy_hitters"] + two["cut_prefixes"]} <= {2}
    one = _simulate(tmp_path, capsys, "--completion-rounds", "0")  # (as --two-runs: none)
    rows = one["heavy_hitters"] + one["cut_prefixes"]
    assert rows and {h["run"] for h in rows} == {1} and one["earlier_runs"] == []
