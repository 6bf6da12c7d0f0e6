"""An interrupted `fedhh experiments` says what it kept and how to go on.

Before: Ctrl-C (or SIGTERM) in the middle of a suite printed only "fedhh experiments:
interrupted"; nothing said that the finished runs were stored, where, or that the same command
resumes (a user who had waited an hour for `experiments all` had to read docs/experiments.md
to learn the hour was not lost).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_kit import run_cli

from fedhh.experiments.runner import Suite


def _argv(users: Path, tmp_path: Path) -> list[str]:
    return ["experiments", "segmentation", "--dataset", str(users), "--seeds", "2", "--quiet",
            "--store", str(tmp_path / "store"), "--out", str(tmp_path / "report")]


def test_an_interrupted_suite_says_what_is_stored_and_the_same_command_resumes(
        users: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    finish = Suite._compute_and_store
    calls = []

    def interrupted_at_the_third(self: Suite, run: object, progress: object) -> object:
        calls.append(run)
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the third of four runs computes
        return finish(self, run, progress)

    monkeypatch.setattr(Suite, "_compute_and_store", interrupted_at_the_third)
    code, _, err = run_cli(_argv(users, tmp_path), capsys)
    assert code == 130, err
    store = tmp_path / "store"
    assert err.strip().splitlines() == [
        f"fedhh experiments segmentation: 2 of 4 runs are stored in {store} (2 computed by this "
        "invocation); the same command computes the other 2 and writes the report",
        "fedhh experiments segmentation: interrupted",
    ]
    assert len(list(store.glob("*.json"))) == 2
    assert not (tmp_path / "report" / "README.md").exists()

    # The same command, uninterrupted, computes the other two and reuses the stored two.
    monkeypatch.setattr(Suite, "_compute_and_store", finish)
    code, _, err = run_cli(_argv(users, tmp_path), capsys)
    assert code == 0, err
    report = (tmp_path / "report" / "README.md").read_text()
    assert "Runs: 4 (2 computed by this invocation, 2 reused from the result store)" in report


def test_a_dataset_of_one_user_is_refused_in_the_experiments_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "... give --eps-local to run with that alone", an option no study has.
    one = tmp_path / "one.txt"
    one.write_text("apple banana\n")
    code, _, err = run_cli(["experiments", "segmentation", "--dataset", str(one), "--seeds", "1",
                            "--quiet", "--store", str(tmp_path / "store"), "--out",
                            str(tmp_path / "report")], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"fedhh experiments segmentation: error: {one}: the dataset has 1 user(s); every study "
        "solves its "
        "runs' eps_local for the aggregate target (--eps-agg, --delta) among the dataset's "
        "users, which needs at least 2"]
    assert "--eps-local" not in err
    assert not (tmp_path / "store").exists() and not (tmp_path / "report").exists()


def test_a_ratio_with_nothing_to_compare_against_is_not_printed_as_nan(
        users: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: `fedhh experiments segmentation --dataset shakespeare --seeds 1` (no run finds
    # anything at eps_agg 1 among 1,387 users) reported "ours nanx", "(+nan%; paper +40%)".
    code, _, err = run_cli(["experiments", "segmentation", "--dataset", str(users), "--seeds",
                            "1", "--eps-agg", "0.01", "--store", str(tmp_path / "store"),
                            "--out", str(tmp_path / "report")], capsys)
    assert code == 0, err
    report = tmp_path / "report"
    claims = json.loads((report / "claims.json").read_text())
    [first] = [c for c in claims if c["claim"].startswith("Adaptive segmentation finds")]
    assert first["ours"] == "- (nothing to compare: the reference found none)"
    assert first["note"].startswith("0 against 0 heavy hitters (no ratio; paper +40%)")
    assert first["verdict"] == "inconclusive"
    for name in ("README.md", "claims.csv"):
        assert not re.search(r"\bnan", (report / name).read_text()), name


def test_fp_ratio_claims_are_inconclusive_when_nothing_was_kept(
        users: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: with every run's output empty (eps_agg far too small for 300 users) "Raising
    # gamma finds only slightly more" and "the ratio tracks the target" read "does not hold".
    code, _, err = run_cli(["experiments", "fp-ratio", "--dataset", str(users), "--seeds", "1",
                            "--eps-agg", "0.01", "--store", str(tmp_path / "store"), "--out",
                            str(tmp_path / "report"), "--quiet"], capsys)
    assert code == 0, err
    claims = json.loads((tmp_path / "report" / "claims.json").read_text())
    verdicts = {c["claim"][:30]: c["verdict"] for c in claims if c["study"] == "fp-ratio"}
    assert verdicts == {
        "Raising gamma from 0.5 to 2 fi": "inconclusive",
        "... but many more false positi": "inconclusive",
        "The empirical false-positive r": "inconclusive",
    }


def test_an_interrupt_before_any_run_is_stored_says_only_interrupted(
        users: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(self: Suite, run: object, progress: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(Suite, "_compute_and_store", interrupted)
    code, _, err = run_cli(_argv(users, tmp_path), capsys)
    assert code == 130
    assert err == "fedhh experiments segmentation: interrupted\n"
