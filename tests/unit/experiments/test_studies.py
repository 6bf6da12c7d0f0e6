"""The studies' configurations: each is feasible and its printed command reproduces it, runs
that are the same run share one store entry, and the comparisons compare like with like
(no simulation needed)."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import replace

import pytest

from fedhh.config import Mode, RunConfig
from fedhh.config.flags import add_run_arguments, config_from_args
from fedhh.errors import ConfigError
from fedhh.experiments import STUDIES, SuiteSettings, get_study
from fedhh.experiments.spec import command_line, run_config, run_key
from fedhh.experiments.studies import MULTI, SINGLE, char_segments

SETTINGS = SuiteSettings("synthetic-reddit")


def configs(name: str) -> dict[str, RunConfig]:
    return {v.label: v.spec for v in get_study(name).variants if v.spec is not None}


def parse_command(command: str) -> tuple[str, RunConfig]:
    """The dataset and configuration `fedhh simulate` would run for a printed command."""
    words = shlex.split(command)
    assert words[:2] == ["fedhh", "simulate"]
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset")
    add_run_arguments(parser, Mode.SIMULATION)
    args = parser.parse_args(words[2:])
    return args.dataset, config_from_args(args, Mode.SIMULATION)


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_every_command_reproduces_its_configuration(study: object) -> None:
    for variant in study.variants:  # type: ignore[attr-defined]
        if variant.spec is None:
            continue
        config = run_config(variant.spec, SETTINGS, 7)
        dataset, parsed = parse_command(command_line(config, SETTINGS))
        assert dataset == SETTINGS.dataset
        assert parsed == config


def test_comparison_reuses_the_rounds_study_runs() -> None:
    identity = {"name": "x"}
    rounds = {run_key(run_config(x, SETTINGS, 0), identity) for x in configs("rounds").values()}
    opt = {run_key(run_config(x, SETTINGS, 0), identity)
           for label, x in configs("comparison").items()
           if x.algorithm == "optprefixtree" and not label.startswith("single")}
    assert opt and opt <= rounds


def test_full_participation_is_the_plain_run() -> None:
    sampled = configs("sampling")
    full = [x for x in sampled.values() if x.sampling_rate == 1.0]
    assert len(full) == 1
    identity = {"name": "x"}
    assert run_key(run_config(full[0], SETTINGS, 0), identity) == \
        run_key(run_config(SINGLE, SETTINGS, 0), identity)


def test_comparison_runs_every_algorithm_at_the_same_rounds_and_segments() -> None:
    multi = [x for label, x in configs("comparison").items() if not label.startswith("single")]
    by_rounds: dict[int, set[str]] = {}
    for x in multi:
        assert x.segment_bits == char_segments(x.rounds, x.max_bits)
        by_rounds.setdefault(x.rounds, set()).add(x.algorithm)
    for algorithms in by_rounds.values():
        assert {"optprefixtree", "triehh", "triehh++"} <= algorithms


def test_the_key_ignores_how_the_dataset_is_named_and_follows_the_seed() -> None:
    config = run_config(RunConfig(), SETTINGS, 3)
    assert command_line(config, SETTINGS).startswith("fedhh simulate --dataset synthetic-reddit")
    other = run_config(RunConfig(), SuiteSettings("/data/reddit"), 3)
    assert run_key(config, {"name": "a"}) == run_key(other, {"name": "a"})
    assert run_key(config, {"name": "a"}) != run_key(config, {"name": "b"})
    assert run_key(config, {"name": "a"}) != run_key(run_config(RunConfig(), SETTINGS, 4),
                                                     {"name": "a"})


@pytest.mark.parametrize("kwargs", [{"algorithm": "nope"}, {"codec": "7bit"},
                                    {"selection": "random"}, {"rounds": 0},
                                    {"sampling_rate": 1.5}])
def test_bad_configurations_name_the_value(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=str(next(iter(kwargs.values())))):
        run_config(RunConfig(**kwargs), SETTINGS, 0)  # type: ignore[arg-type]


def test_unknown_study() -> None:
    with pytest.raises(ConfigError, match="unknown study 'nope'"):
        get_study("nope")


def test_a_variant_on_another_dataset_runs_there() -> None:
    study = get_study("codebooks")
    german = [v for v in study.variants if v.dataset == "synthetic-german"]
    default = [v for v in study.variants if v.dataset is None]
    assert german and default
    for variant in german:
        config = run_config(variant.spec, SETTINGS, 0)  # type: ignore[arg-type]
        dataset, _ = parse_command(command_line(config, SETTINGS, variant.dataset))
        assert dataset == "synthetic-german"
    assert {v.setting for v in german}.isdisjoint({v.setting for v in default})


def test_the_accounting_study_reuses_the_base_runs_and_swaps_only_the_accountant() -> None:
    identity = {"name": "x"}
    study = configs("accounting")
    exact = {run_key(run_config(x, SETTINGS, 0), identity) for x in study.values()
             if x.privacy_method is None}
    base = {run_key(run_config(x, SETTINGS, 0), identity)
            for x in (MULTI, SINGLE)}
    assert exact == base
    for x in study.values():
        plain = replace(x, privacy_method=RunConfig().privacy_method)
        assert plain in (MULTI, SINGLE)


def test_local_count_noise_is_the_binomial_estimate_spread() -> None:
    import numpy as np

    from fedhh.experiments.claims import local_count_sd

    # the comparison note's figure: eps_local 9.61 over 1.6M devices, as much noise on a count
    # as the central Gaussian baseline's sigma at T = 12 (20.7)
    assert local_count_sd(9.61, 1_600_000) == pytest.approx(20.72, abs=0.01)
    # against sampled sums: the estimate of an item nobody holds, 20,000 draws (the sample sd
    # of 20,000 normal-ish draws is within 3% of the truth except with probability < 1e-9)
    rng = np.random.default_rng(7)
    a0 = 1.0 / (np.exp(6.0) + 1.0)
    sums = rng.binomial(100_000, a0, size=20_000)
    estimates = (sums - 100_000 * a0) / (0.5 - a0)
    assert float(np.std(estimates, ddof=1)) == pytest.approx(local_count_sd(6.0, 100_000),
                                                              rel=0.03)


def test_the_command_help_lists_every_study_with_its_number() -> None:
    import re

    from fedhh.cli import experiments

    listed = dict(re.findall(r"^  ([a-z-]+) +(\d+)\. ", experiments.__doc__ or "", re.M))
    assert listed == {s.name: str(s.number) for s in STUDIES}
