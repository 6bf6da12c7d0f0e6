"""The utility levers' studies (issue 15): every run names a population fixed before tuning,
every baseline is the paper's algorithm (the same store entry as today's default), the
combination is exactly the levers, and the claims' verdicts follow the target's definition
(checked on made-up results, no simulation)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fedhh.config import RunConfig
from fedhh.experiments import SuiteSettings
from fedhh.experiments.analysis import StudyResults, VariantResult
from fedhh.experiments.claims import evaluate_claims
from fedhh.experiments.lever_claims import TARGET, meets_target
from fedhh.experiments.populations import DEVELOPMENT, HELD_OUT
from fedhh.experiments.spec import run_config, run_key
from fedhh.experiments.store import RunRecord
from fedhh.experiments.studies import (
    COMBINED,
    FINAL,
    FINAL_ITEMS,
    ITEMS_SWEEP,
    KINDS_POPULATIONS,
    LEVERS,
    PAPER,
    SMALL_SWEEP,
    SWEEP_POPULATIONS,
    UTILITY_GROUP,
    UTILITY_POPULATIONS,
    Study,
    get_study,
    group_studies,
)
from fedhh.experiments.verdicts import FAILS, HOLDS, MIXED, PARTLY, VERDICTS

SETTINGS = SuiteSettings("synthetic-reddit")
SEEDS = [0, 1, 2]


def test_every_lever_run_names_a_population_fixed_before_tuning() -> None:
    studies = [s for s in group_studies(UTILITY_GROUP) if s.name != "item-kinds"]
    assert [s.number for s in studies] == list(range(12, 23))
    kinds = get_study("item-kinds")  # issue 27: compares codes, tunes nothing
    assert kinds.number == 23 and {v.dataset for v in kinds.variants} == set(KINDS_POPULATIONS)
    allowed = {*DEVELOPMENT, *HELD_OUT, "synthetic-reddit"}
    assert set(UTILITY_POPULATIONS) == allowed
    for study in studies:
        for variant in study.variants:
            assert variant.dataset in allowed, (study.name, variant.label)
            assert variant.params["population"] == variant.dataset
    # Sweeps (studies 12-19) run on development populations only; elsewhere studies 20 and 21
    # run only the paper and fixed combinations.
    for study in studies:
        if study.name not in ("utility", "small-regime", "round-items"):
            assert {v.dataset for v in study.variants} <= set(DEVELOPMENT), study.name
    for variant in get_study("small-regime").variants:
        if variant.dataset not in DEVELOPMENT:
            assert variant.spec in (PAPER, FINAL), variant.label
    for variant in get_study("round-items").variants:
        if variant.dataset not in DEVELOPMENT:
            assert variant.spec in (PAPER, FINAL, FINAL_ITEMS), variant.label


def test_baselines_are_the_paper() -> None:
    """The paper's algorithm, spelled out: the default before issue 27 (its code, english, and
    no completion rounds), whatever the defaults are now."""
    identity = {"name": "x"}
    old_default = RunConfig(codec="english", completion_rounds=0, fp_ratio_finished=None)
    assert run_key(run_config(PAPER, SETTINGS, 0), identity) == \
        run_key(run_config(old_default, SETTINGS, 0), identity)
    assert PAPER.completion() == 0 and PAPER.codec == "english"
    assert PAPER.segment_plan == "greedy" and PAPER.selection_hint == 0
    assert PAPER.fp_ratio_finished is None and PAPER.threshold_weights == "uniform"
    assert PAPER.round_budget == "equal" and PAPER.leftover_rounds == "idle"
    assert PAPER.domain == "full" and PAPER.fp_ratio == 0.5 and PAPER.eta == 0.5
    utility = get_study("utility")
    for pop in UTILITY_POPULATIONS:
        assert utility.variant(f"{pop}: paper").spec == PAPER


def test_the_combination_is_exactly_the_levers() -> None:
    expected = PAPER
    for values in LEVERS.values():
        expected = replace(expected, **values)
    assert expected == COMBINED
    utility = get_study("utility")
    for pop in UTILITY_POPULATIONS:
        assert utility.variant(f"{pop}: combined").spec == COMBINED
        for name, values in LEVERS.items():
            assert utility.variant(f"{pop}: {name}").spec == replace(PAPER, **values)


def test_the_small_regime_candidates_are_one_change_each_on_the_combination() -> None:
    small = get_study("small-regime")
    for pop in SWEEP_POPULATIONS:
        assert small.variant(f"{pop}: paper").spec == PAPER
        assert small.variant(f"{pop}: combined").spec == COMBINED
        for label, values in SMALL_SWEEP.items():
            assert small.variant(f"{pop}: combined, {label}").spec == replace(COMBINED, **values)
    assert PAPER.round_fp_ratio == "equal" and RunConfig().round_fp_ratio == "equal"
    assert replace(COMBINED, eta=0.8) == FINAL


def test_the_item_candidates_are_one_change_each_on_study_21s_final() -> None:
    items = get_study("round-items")
    for pop in SWEEP_POPULATIONS:
        assert items.variant(f"{pop}: paper").spec == PAPER
        assert items.variant(f"{pop}: study 21 final").spec == FINAL
        for k in ITEMS_SWEEP:
            assert items.variant(f"{pop}: final, items {k}").spec == replace(FINAL, round_items=k)
    assert PAPER.round_items == "1" and RunConfig().items_per_round() is None
    assert replace(FINAL, round_items=FINAL_ITEMS.round_items) == FINAL_ITEMS
    assert FINAL_ITEMS.items_per_round() is not None
    for pop in UTILITY_POPULATIONS:
        assert items.variant(f"{pop}: final with items").spec == FINAL_ITEMS


def record(seed: int, found: float, fp_ratio: float) -> RunRecord:
    metrics = {"true_positives": found, "false_positive_ratio": fp_ratio}
    data = {"metrics": metrics, "privacy": {"eps_local": 9.0}, "segments": [23, 12, 12, 13],
            "rounds": [{"kept": 10, "trimmed": 0, "threshold": 40.0,
                        "actual_false_positives": 1}] * 4}
    return RunRecord(f"k{seed}-{found}", seed, [], "fedhh simulate", data)


def results(study: Study, values: dict[str, tuple[list[float], list[float]]]) -> StudyResults:
    """Made-up results: per label, heavy hitters and FP ratios by seed (default: 100, 0.1)."""
    variants = {}
    for v in study.variants:
        found, fp = values.get(v.label, ([100.0] * 3, [0.1] * 3))
        variants[v.label] = VariantResult(v, [record(s, f, p) for s, f, p in
                                              zip(SEEDS, found, fp, strict=True)])
    return StudyResults(study, SEEDS, variants, 1000)


@pytest.mark.parametrize("found,fp,verdict", [
    ([125, 121, 130], [0.08, 0.1, 0.05], HOLDS),
    ([125, 115, 130], [0.08, 0.1, 0.05], PARTLY),       # one seed short of the target
    ([125, 121, 130], [0.08, 0.11, 0.05], MIXED),       # a worse FP ratio in one seed
    ([101, 100, 99], [0.1, 0.1, 0.1], FAILS),           # no effect
])
def test_the_target_verdict(found: list[float], fp: list[float], verdict: str) -> None:
    study = get_study("utility")
    pop = HELD_OUT[0]
    r = results(study, {f"{pop}: combined": (found, fp)})
    got, note = meets_target(r, f"{pop}: combined", f"{pop}: paper")
    assert got == verdict, note
    assert TARGET == 1.2


def test_a_lever_wins_only_on_every_population() -> None:
    study = get_study("utility")
    lever = next(iter(LEVERS))
    better = {f"{pop}: {lever}": ([110.0] * 3, [0.09] * 3) for pop in UTILITY_POPULATIONS}
    claims = evaluate_claims(results(study, better))
    claim = next(c for c in claims if c.claim.lower().startswith(lever.lower()))
    assert claim.verdict == HOLDS
    worse = dict(better)
    worse[f"{HELD_OUT[1]}: {lever}"] = ([110.0] * 3, [0.2] * 3)  # more found, FP ratio worse
    claims = evaluate_claims(results(study, worse))
    claim = next(c for c in claims if c.claim.lower().startswith(lever.lower()))
    assert claim.verdict == PARTLY


@pytest.mark.parametrize("study", group_studies(UTILITY_GROUP), ids=lambda s: s.name)
def test_every_lever_study_has_claims(study: Study) -> None:
    rng = np.random.default_rng(len(study.name))
    values = {v.label: (list(rng.uniform(90, 130, 3)), list(rng.uniform(0.05, 0.2, 3)))
              for v in study.variants}
    claims = evaluate_claims(results(study, values))
    assert claims and all(c.verdict in VERDICTS and c.study == study.name for c in claims)


def test_the_item_kinds_claims_read_whole_items() -> None:
    """Study 23 judges on whole items and their share of the output, not on codes."""
    study = get_study("item-kinds")
    default, paper = "default (unicode + completion + target)", "paper (english, 60 bits)"

    def kinds_record(seed: int, whole: float, precision: float) -> RunRecord:
        rec = record(seed, whole, 0.1)
        rec.data["metrics"].update(whole_items_found=whole, whole_precision=precision,
                                   whole_recall_at={"50": 0.9, "100": 0.8})
        return rec

    def outcome(default_whole: float, precision: float) -> dict[str, str]:
        variants = {}
        for v in study.variants:
            whole, prec = ((default_whole, precision) if v.label.endswith(default)
                           else (100.0, 0.5))
            variants[v.label] = VariantResult(v, [kinds_record(s, whole, prec) for s in SEEDS])
        claims = evaluate_claims(StudyResults(study, SEEDS, variants, 1000))
        pop = KINDS_POPULATIONS[0]
        return {c.claim: c.verdict for c in claims
                if f"({pop})" in c.claim and "default" in c.claim}

    good = outcome(300.0, 0.9)
    assert set(good.values()) == {HOLDS}
    assert all(v == FAILS for v in outcome(90.0, 0.7).values())
    assert paper in study.variant(f"{KINDS_POPULATIONS[0]}: {paper}").label
