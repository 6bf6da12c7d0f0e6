"""`fedhh privacy`: a nonsense number of rounds is refused at once, and every figure names the
results it rests on.

Before: `fedhh privacy --eps-agg 1 --delta 1e-6 --rounds 100000000 --devices 1000` computed for
minutes (one list entry per round, gigabytes) until Ctrl-C, with no answer and no word; a run
can have at most 1,024 rounds and 1,024 completion rounds. And the default method's answer
(`fedhh privacy --eps-agg 1 --delta 1e-6 --rounds 4 --devices 1600000`, the README's line)
printed its epsilon with no theorem at all, the Laplace routes and TrieHH++ likewise, while the
shuffle methods named only the conversion (CKS20), not the bound of a round.
"""

from __future__ import annotations

import json
import time

import pytest
from cli_kit import one_line_error, run_cli

from fedhh.config import MAX_ROUNDS


@pytest.mark.parametrize("form", [
    ["--eps-agg", "1", "--devices", "1000"],
    ["amplify", "--eps-local", "4", "--devices", "1000"],
    ["triehh++", "--eps-agg", "1", "--theta", "10"],
    ["central-gaussian", "--eps-agg", "1"],
])
@pytest.mark.parametrize("rounds", [str(2 * MAX_ROUNDS + 1), "100000000"])
def test_more_rounds_than_a_run_can_have_are_refused_at_once(
        form: list[str], rounds: str, capsys: pytest.CaptureFixture[str]) -> None:
    # (CPU time: the old code computed for minutes, where a busy machine stretches the wall
    # time of a refusal that takes milliseconds of work)
    started = time.process_time()
    line = one_line_error(["privacy", *form, "--delta", "1e-6", "--rounds", rounds], capsys)
    assert time.process_time() - started < 5
    assert line == (f"fedhh privacy: error: argument --rounds: must be at most "
                    f"{2 * MAX_ROUNDS:,} (the most one run can have: {MAX_ROUNDS:,} rounds and "
                    f"{MAX_ROUNDS:,} completion rounds), got {rounds}")


def test_the_most_rounds_a_run_can_have_are_still_accounted(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["privacy", "central-gaussian", "--eps-agg", "1", "--delta", "1e-6",
                              "--rounds", str(2 * MAX_ROUNDS), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["noise_scale"] > 0


def _sources(out: str) -> list[str]:
    return [line.split("sources: ", 1)[1] for line in out.splitlines() if "sources: " in line]


def test_the_default_answer_names_its_theorems(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["privacy", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4",
                              "--devices", "1600000"], capsys)
    assert code == 0, err
    [cited] = _sources(out)
    assert "Doroshenko et al. 2022, Alg. 1" in cited
    assert "Zhu, Dong, Wang 2022, Thm 10" in cited
    assert "Dwork & Roth, Thm 3.16" in cited
    assert "Dong, Roth, Su" not in cited  # no sampling, no sampling theorem


def test_json_carries_the_same_sources(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["privacy", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4", "--devices",
            "100000", "--sampling-rate", "0.5"]
    code, out, _ = run_cli(argv, capsys)
    assert code == 0
    [text] = _sources(out)
    code, out, _ = run_cli([*argv, "--json"], capsys)
    assert code == 0
    assert json.loads(out)["sources"] == text
    assert "Dong, Roth, Su 2022, Thm 4.2" in text


def test_each_method_of_amplify_names_what_it_rests_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["privacy", "amplify", "--eps-local", "6", "--delta", "1e-6",
                              "--rounds", "4", "--devices", "100000", "--sampling-rate", "0.5",
                              "--json"], capsys)
    assert code == 0, err
    cited = {r["method"]: r["sources"] for r in json.loads(out)["results"]}
    assert set(cited) == {"sum", "clones", "paper", "closed-form"}
    assert "Hiding Among the Clones" in cited["clones"]
    assert "Mironov 2017, Prop. 1" in cited["clones"] and "KOV Thm 3.4" in cited["clones"]
    # The paper's sampled rounds have an RDP curve only (Zhu-Wang on the shuffle RDP): no KOV.
    assert "FMT23" in cited["paper"] and "Thm 3.2" in cited["paper"]
    assert "Zhu & Wang 2019, Thm 5" in cited["paper"] and "KOV" not in cited["paper"]
    # The closed form is an (eps, delta) without an RDP curve; sampled, only basic composition.
    assert "Thm 3.1" in cited["closed-form"] and "Mironov" not in cited["closed-form"]
    assert "basic composition" in cited["closed-form"]


def test_unsampled_closed_form_composes_by_kov(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["privacy", "amplify", "--eps-local", "4", "--delta", "1e-6",
                            "--rounds", "4", "--devices", "100000", "--privacy-method",
                            "closed-form"], capsys)
    assert code == 0
    [cited] = _sources(out)
    assert cited.endswith("rounds composed by advanced composition (KOV Thm 3.4)")


@pytest.mark.parametrize("form, source", [
    (["triehh", "--devices", "1600000"], "Zhu, Kairouz, McMahan, Sun, Li 2020, Cor. 1"),
    (["triehh++"], "Cormode & Bharadwaj 2022, Lemma 3"),
])
def test_baselines_name_their_lemma(form: list[str], source: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["privacy", *form, "--theta", "10", "--eps-agg", "1", "--delta",
                              "1e-6", "--rounds", "4"], capsys)
    assert code == 0, err
    [cited] = _sources(out)
    assert cited.startswith(source)


def test_laplace_routes_are_cited(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["privacy", "central-laplace", "--eps-agg", "1", "--delta", "1e-6",
                            "--rounds", "4"], capsys)
    assert code == 0
    route = out.splitlines()[1]
    for name in ("Koskela, Jalko, Honkela 2020", "Mironov 2017, Table 2", "KOV Thm 3.4"):
        assert name in route


@pytest.mark.parametrize("form", [
    ["--eps-agg", "1", "--devices", "100000"],
    ["amplify", "--eps-local", "4", "--devices", "100000"],
])
def test_the_former_method_name_is_cited_as_clones(form: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["privacy", *form, "--delta", "1e-6", "--rounds", "4",
                              "--privacy-method", "exact"], capsys)
    assert code == 0, err
    [cited] = _sources(out)
    assert "Hiding Among the Clones" in cited


@pytest.mark.parametrize(("form", "said"), [
    (["amplify", "--eps-local", "4", "--privacy-method", "clones"],
     "eps_local = 4.0 per round, 1 round, 100000 devices, sampling rate 1.0: aggregate "
     "(eps, delta) by method"),
    (["--eps-agg", "1"], "at delta = 1e-06, 1 round, 100000 participants per round")])
def test_one_round_is_said_in_the_singular(form: list[str], said: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # (the README's `privacy amplify ... --rounds 1` line said "1 rounds")
    code, out, _ = run_cli(["privacy", *form, "--delta", "1e-6", "--rounds", "1", "--devices",
                            "100000"], capsys)
    assert code == 0 and said in out, out


@pytest.mark.parametrize(("form", "said"), [
    ([], "--eps-agg and --devices are required for optprefixtree"),
    (["triehh", "--theta", "3"], "--eps-agg and --devices are required for triehh"),
    (["triehh++"], "--eps-agg and --theta are required for triehh++"),
    (["amplify", "--devices", "10"], "--eps-local is required for amplify")])
def test_every_missing_option_is_named_at_once(form: list[str], said: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # (before, one a try: --eps-agg, and once it was given, --devices)
    line = one_line_error(["privacy", *form, "--delta", "1e-6", "--rounds", "4"], capsys)
    assert line == f"fedhh privacy: error: {said}"


@pytest.mark.parametrize(("form", "said"), [
    ([], "--eps-agg, --delta, --rounds and --devices are required for optprefixtree"),
    (["central-laplace", "--delta", "1e-6"],
     "--eps-agg and --rounds are required for central-laplace"),
    (["amplify", "--eps-local", "4", "--rounds", "2", "--devices", "10"],
     "--delta is required for amplify")])
def test_delta_and_rounds_are_named_with_the_form_s_other_options(
        form: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    # (before, argparse stopped on --delta and --rounds first, then the form on the rest)
    assert one_line_error(["privacy", *form], capsys) == f"fedhh privacy: error: {said}"
