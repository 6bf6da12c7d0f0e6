"""The PI-RAPPOR study end to end on a tiny dataset: its runs (both randomizers and the decode
timing measurement), its claims and its figures. The study's own configurations are full
scale; here the same labels run cheap ones, and the timing measures two small domains."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fedhh.config import RunConfig
from fedhh.data.dataset import from_user_counts, save_dataset
from fedhh.data.registry import resolve_dataset
from fedhh.experiments import SuiteSettings
from fedhh.experiments.claims import decode_speedups, evaluate_claims
from fedhh.experiments.report import study_results, write_report
from fedhh.experiments.runner import Suite, result_records
from fedhh.experiments.store import ResultStore
from fedhh.experiments.studies import DECODE_TIMING, StudyVariant, get_study
from fedhh.experiments.verdicts import VERDICTS
from fedhh.pirappor import timing


def tiny_dataset(tmp: Path):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    words = ["the", "and", "you", "that", "was", "for", "apple", "zebra"]
    weights = 1.0 / np.arange(1, len(words) + 1)
    users = []
    for _ in range(3000):
        held = rng.choice(len(words), size=int(rng.integers(1, 4)), replace=False,
                          p=weights / weights.sum())
        users.append({words[i]: int(rng.integers(1, 4)) for i in held})
    return resolve_dataset(save_dataset(from_user_counts(users, name="tiny"), tmp / "tiny"))


def test_study_runs_claims_and_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "FIRST_ROUND", ((1, 10), (1, 14)))
    monkeypatch.setattr(timing, "LATER_ROUNDS", ((4, 8), (64, 8)))
    monkeypatch.setattr(timing, "SAMPLE", 2000)
    monkeypatch.setattr(timing, "BUDGET_NS", 2e8)
    full = get_study("pi-rappor")
    assert [v.label for v in full.variants] == ["OHE+RR", "PI-RAPPOR", "decode timing"]
    assert full.variants[1].spec is not None and full.variants[1].spec.randomizer == "pi-rappor"
    cheap = RunConfig(eps_local=6.0, codec="5bit", max_bits=30, rounds=3, dim_limit=1 << 16,
                      privacy_method="clones")
    study = replace(full, variants=(
        StudyVariant("OHE+RR", cheap),
        StudyVariant("PI-RAPPOR", replace(cheap, randomizer="pi-rappor")),
        StudyVariant("decode timing", None, static=DECODE_TIMING)))
    dataset = tiny_dataset(tmp_path)
    suite = Suite(SuiteSettings(str(tmp_path / "tiny")), ResultStore(tmp_path / "store"), dataset)
    plan = suite.plan([study], [0])
    assert len(plan) == 3
    records = suite.execute(plan)
    results = study_results(study, [0], result_records(study, suite, [0], records),
                            dataset.num_users)
    rows = results["decode timing"].records[0].data["rows"]
    assert len(rows) == 4 * 4 and sum(r["auto"] for r in rows) == 4
    # Wall-clock ratios: their sizes are the benchmark's business (bench/bench_pirappor.py); a
    # loaded machine may invert them at this tiny budget, so only their form is checked here.
    speedups = decode_speedups(rows)
    assert len(speedups) == 4
    assert all(s["direct"] > 0 and s["histogram"] > 0 and s["auto_over_fastest"] >= 1
               for s in speedups)
    claims = evaluate_claims(results)
    assert len(claims) == 5 and all(c.verdict in VERDICTS for c in claims)
    assert claims[1].verdict == "holds"  # a few bytes against a D-bit vector
    report = write_report(tmp_path / "report", [results], {"command": "test"})
    folder = tmp_path / "report" / "pi-rappor"
    for name in ("pi-rappor.png", "found.png", "pi-rappor-bytes.png", "pi-rappor-decode.png"):
        assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert "pi-rappor-decode.png" in report.path.read_text()
    # The timing is stored per privacy target: another eps_agg is another measurement.
    other = Suite(SuiteSettings(str(tmp_path / "tiny"), eps_agg=2.0), suite.store, dataset)
    timing_run = next(run for run in plan if run.static == DECODE_TIMING)
    assert other.planned(study, study.variants[2], 0).key != timing_run.key
