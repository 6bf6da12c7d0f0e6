"""Every study's configurations are what issue 6 asks for (no simulation needed)."""

from __future__ import annotations

import argparse
import math

import pytest

from fedhh.cli.simulate import add_run_options
from fedhh.errors import ConfigError
from fedhh.experiments import STUDIES, RunSpec, Settings, get_study
from fedhh.experiments.spec import command_line, run_key, simulate_argv
from fedhh.experiments.studies import char_segments
from fedhh.prefixtree import TreeConfig

SETTINGS = Settings("synthetic-reddit")


def specs(name: str) -> dict[str, RunSpec]:
    return {v.label: v.spec for v in get_study(name).variants if v.spec is not None}


def test_nine_studies_in_order() -> None:
    assert [s.name for s in STUDIES] == ["segmentation", "dimension", "fp-ratio", "sampling",
                                         "selection", "deny-list", "comparison", "rounds",
                                         "codebooks"]
    assert [s.number for s in STUDIES] == list(range(1, 10))


def test_codebooks_compare_letters_bytes_and_trained_on_two_populations() -> None:
    runs = specs("codebooks")
    assert {label: (spec.encoding, spec.dataset) for label, spec in runs.items()} == {
        "default: English letters": ("huffman", None),
        "default: bytes": ("bytes", None),
        "default: trained (english)": ("english", None),
        "german: English letters": ("huffman", "synthetic-german"),
        "german: bytes": ("bytes", "synthetic-german"),
        "german: trained (german)": ("german", "synthetic-german"),
    }
    german = simulate_argv(runs["german: bytes"], SETTINGS, 0)
    assert german[german.index("--dataset") + 1] == "synthetic-german"
    default = simulate_argv(runs["default: bytes"], SETTINGS, 0)
    assert default[default.index("--dataset") + 1] == "synthetic-reddit"
    assert runs["german: bytes"].setting != runs["default: bytes"].setting


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_every_configuration_is_feasible_and_parses(study: object) -> None:
    parser = argparse.ArgumentParser()
    add_run_options(parser)
    for variant in study.variants:  # type: ignore[attr-defined]
        if variant.spec is None:
            continue
        spec = variant.spec
        TreeConfig(spec.rounds, spec.dim_limit, spec.fp_ratio,
                   segment_bits=spec.segment_bits).validate(spec.max_bits)
        args = parser.parse_args(simulate_argv(spec, SETTINGS, 0))
        assert (args.rounds, args.dim_limit, args.fp_ratio) == (spec.rounds, spec.dim_limit,
                                                                 spec.fp_ratio)
        assert (args.algorithm, args.encoding, args.single_item) == (
            spec.algorithm, spec.encoding, spec.single_item)
        assert args.segment_bits == spec.segment_bits
        assert args.selection == spec.selection
        assert args.no_prefix_conditioning is not spec.prefix_conditioning
        assert (args.warm_start, args.two_runs) == (spec.warm_start, spec.two_runs)
        assert (args.eps_agg, args.delta, args.max_bits) == (1.0, 1e-6, 60)


def test_segmentation() -> None:
    s = specs("segmentation")
    assert set(s) == {"adaptive", "uniform s=15"}
    assert all(x.single_item and x.rounds == 4 and x.dim_limit == 10**7 for x in s.values())
    assert s["adaptive"].segment_bits is None
    assert s["uniform s=15"].segment_bits == 15


def test_dimension() -> None:
    s = list(specs("dimension").values())
    assert [(x.dim_limit, x.rounds) for x in s] == [
        (20_000_000, 4), (10_000_000, 4), (1_000_000, 4), (1_000_000, 5)]
    assert all(x.single_item and x.segment_bits is None for x in s)


def test_fp_ratio() -> None:
    s = list(specs("fp-ratio").values())
    assert [x.fp_ratio for x in s] == pytest.approx([1 / 3, 0.5, 0.6, 2 / 3])
    assert all(x.single_item and x.rounds == 4 and x.dim_limit == 10**7 for x in s)


def test_sampling_rates_and_full_participation_shares_the_plain_run() -> None:
    s = list(specs("sampling").values())
    assert [x.sampling_rate for x in s] == pytest.approx([q / 10 for q in range(1, 11)])
    assert all(x.single_item and x.rounds == 4 for x in s)
    plain = simulate_argv(RunSpec(single_item=True), SETTINGS, 0)
    assert simulate_argv(s[-1], SETTINGS, 0) == plain
    assert "--sampling-rate" in simulate_argv(s[0], SETTINGS, 0)


def test_selection() -> None:
    s = specs("selection")
    combos = {(x.selection, x.prefix_conditioning) for x in s.values()}
    assert combos == {("uniform", True), ("uniform", False), ("weighted", True),
                      ("weighted", False)}
    assert all(not x.single_item and x.rounds == 4 for x in s.values())


def test_deny_lists() -> None:
    study = get_study("deny-list")
    s = specs("deny-list")
    assert [(x.warm_start, x.two_runs) for x in s.values()] == [
        (False, False), (True, False), (False, True)]
    assert s["2 runs"].total_rounds == 8
    assert study.variant("warm start list").static == "warm-start-list"


def test_comparison_sweeps_the_baselines_at_the_same_rounds_and_segments() -> None:
    s = specs("comparison")
    assert all(x.encoding == "5bit" for x in s.values())
    multi = [x for label, x in s.items() if not label.startswith("single")]
    for algorithm in ("optprefixtree", "triehh", "triehh++"):
        rounds = sorted(x.rounds for x in multi if x.algorithm == algorithm)
        assert rounds == [3, 4, 6, 12]
    for x in multi:
        assert x.segment_bits == char_segments(x.rounds) and x.dim_limit == 10**7
        assert not x.single_item and x.selection == "uniform" and x.prefix_conditioning
    central = {(x.algorithm, x.rounds) for x in multi if x.algorithm.startswith("central")}
    assert central == {(a, t) for a in ("central-laplace", "central-gaussian") for t in (4, 12)}
    single = [x for label, x in s.items() if label.startswith("single")]
    opt = [x for x in single if x.algorithm == "optprefixtree"]
    assert len(opt) == 1 and opt[0].fp_ratio == pytest.approx(2 / 3) and opt[0].rounds == 4
    assert opt[0].segment_bits is None
    assert sorted((x.algorithm, x.rounds) for x in single if x.algorithm != "optprefixtree") == \
        sorted((a, t) for a in ("triehh", "triehh++") for t in (3, 4, 6, 12))
    assert all("--theta" in simulate_argv(x, SETTINGS, 0) for x in s.values()
               if x.algorithm.startswith("triehh"))


def test_rounds_three_to_twelve_with_the_5bit_encoding() -> None:
    s = specs("rounds")
    fixed = [x for label, x in s.items() if label != "T=4 adaptive"]
    assert [x.rounds for x in fixed] == list(range(3, 13))
    for x in fixed:
        assert x.encoding == "5bit" and not x.single_item
        assert x.segment_bits == math.ceil(60 / x.rounds)
    assert s["T=12"].segment_bits == 5
    assert s["T=4 adaptive"].segment_bits is None


def test_comparison_reuses_the_rounds_study_runs() -> None:
    identity = {"name": "x"}
    rounds = {run_key(simulate_argv(x, SETTINGS, 0), identity) for x in specs("rounds").values()}
    opt = {run_key(simulate_argv(x, SETTINGS, 0), identity)
           for label, x in specs("comparison").items()
           if x.algorithm == "optprefixtree" and not label.startswith("single")}
    assert opt <= rounds


def test_argv_is_a_runnable_command_and_the_key_ignores_how_the_dataset_is_named() -> None:
    argv = simulate_argv(RunSpec(), SETTINGS, 3)
    assert command_line(argv).startswith("fedhh simulate --dataset synthetic-reddit ")
    assert argv[-2:] == ["--seed", "3"]
    other = simulate_argv(RunSpec(), Settings("/data/reddit"), 3)
    assert run_key(argv, {"name": "a"}) == run_key(other, {"name": "a"})
    assert run_key(argv, {"name": "a"}) != run_key(argv, {"name": "b"})
    assert run_key(argv, {"name": "a"}) != run_key(simulate_argv(RunSpec(), SETTINGS, 4),
                                                   {"name": "a"})


@pytest.mark.parametrize("kwargs", [{"algorithm": "nope"}, {"encoding": "7bit"},
                                    {"selection": "random"}, {"rounds": 0},
                                    {"sampling_rate": 1.5}])
def test_bad_specs_name_the_value(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=str(next(iter(kwargs.values())))):
        RunSpec(**kwargs)  # type: ignore[arg-type]


def test_unknown_study() -> None:
    with pytest.raises(ConfigError, match="unknown study 'nope'"):
        get_study("nope")
