"""The report's "false-positive ratio stays below gamma" claims are inconclusive when no run
output anything, not "holds".

Before: `fedhh experiments segmentation --dataset shakespeare --eps-agg 0.01` (a population
far too small for the budget: every run's output empty) reported the claim as **holds**,
"ours adaptive 0.00 (rounds -); uniform s=15 0.00 (rounds 1.00)": a ratio of nothing bounds
nothing. Runs seeded: the outputs are fixed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

from fedhh.data.dataset import from_user_counts, save_dataset

WORDS = ("the", "and", "you", "that", "was", "for", "with", "have", "this", "not", "apple")
CLAIM = "The empirical false-positive ratio stays below gamma = 0.5"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(7)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    users = []
    for _ in range(3000):
        held = rng.choice(len(WORDS), size=int(rng.integers(1, 4)), replace=False,
                          p=weights / weights.sum())
        users.append({WORDS[i]: 1 for i in held})
    path = tmp_path_factory.mktemp("firsthour35") / "words"
    return save_dataset(from_user_counts(users, name="words", provenance="test"), path)


def fp_claim(dataset: Path, tmp_path: Path, eps_agg: str,
             capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, str], list[float]]:
    out = tmp_path / f"report-{eps_agg}"
    code, _, err = run_cli(["experiments", "segmentation", "--dataset", str(dataset), "--seeds",
                            "1", "--eps-agg", eps_agg, "--store", str(tmp_path / "store"),
                            "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    claim = next(c for c in json.loads((out / "claims.json").read_text())
                 if c["claim"] == CLAIM)
    records = [json.loads(p.read_text()) for p in (tmp_path / "store").glob("*.json")]
    outputs = [r["metrics"]["discovered"] for r in records
               if r["config"]["eps_agg"] == float(eps_agg)]
    return claim, outputs


def test_no_output_in_any_run_is_inconclusive(dataset: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    claim, outputs = fp_claim(dataset, tmp_path, "0.01", capsys)
    assert outputs and not any(outputs)  # the premise: nothing output, in either variant
    assert claim["verdict"] == "inconclusive"


def test_runs_with_output_are_judged_as_before(dataset: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    claim, outputs = fp_claim(dataset, tmp_path, "8", capsys)
    assert any(outputs)
    assert claim["verdict"] in ("holds", "does not hold")
