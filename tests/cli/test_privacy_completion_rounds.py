"""`fedhh privacy --completion-rounds C` plans a run as it runs: --rounds main rounds and as
many of C completion rounds as --devices can budget, each at eps_local + ln(its weight), the
local epsilon the coordinator solves for the same run. Before, `fedhh privacy` had no completion
rounds: for `fedhh up`'s run (eps_agg 2, 4 rounds, n_min 1,248) it said 4.853 where the run
used 4.789 with its 7 completion rounds, and no command gave the README's 10.60."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cli_kit import one_line_error, run_cli

from fedhh.config import RunConfig, with_most_completions


def test_the_figure_is_the_coordinator_s(capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh_coordinator.runs import open_ledger

    code, out, err = run_cli(["privacy", "--eps-agg", "2", "--delta", "1e-6", "--rounds", "4",
                              "--devices", "1248", "--completion-rounds", "32", "--json"], capsys)
    assert code == 0, err
    shown = json.loads(out)
    run, ledger = with_most_completions(
        replace(RunConfig(), eps_agg=2.0, delta=1e-6, rounds=4, min_devices=1248,
                completion_rounds=32), open_ledger, lambda ledger: ledger.eps_local)
    assert (shown["completion_rounds"], shown["completion_rounds_asked"]) == (
        run.completion(), 32) == (7, 32)
    assert shown["eps_local"] == ledger.eps_local
    assert shown["rounds"] == 11
    code, out, _ = run_cli(["privacy", "--eps-agg", "2", "--delta", "1e-6", "--rounds", "4",
                            "--devices", "1248", "--completion-rounds", "32"], capsys)
    assert ("  with 7 of the 32 completion rounds asked for (the most 1248 devices can budget"
            in out), out


@pytest.mark.parametrize(("form", "said"), [
    (["amplify", "--eps-local", "4", "--devices", "100", "--completion-rounds", "3"],
     "--completion-rounds does not apply to amplify"),
    (["central-gaussian", "--eps-agg", "1", "--completion-weight", "0.5"],
     "--completion-weight does not apply to central-gaussian"),
    (["--eps-agg", "1", "--devices", "100", "--completion-weight", "0.5"],
     "--completion-weight weighs completion rounds: give --completion-rounds too"),
    (["--eps-agg", "1", "--devices", "100", "--completion-rounds", "3", "--privacy-method",
      "clones"], "--completion-rounds needs the sum accountant, not --privacy-method clones (a "
                 "run's completion rounds need it too)")])
def test_completion_rounds_are_refused_where_no_run_has_them(
        form: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["privacy", *form, "--delta", "1e-6", "--rounds", "4"], capsys)
    assert line == f"fedhh privacy: error: {said}"


def test_a_figure_above_the_devices_floor_says_what_a_networked_run_runs_at(
        capsys: pytest.CaptureFixture[str]) -> None:
    """At the paper's 1.6M devices and eps_agg 1 the accountant allows 10.6035, above the 10 a
    device accepts; the coordinator holds the run at its max_eps_local (``open_ledger``), so
    the figure is fedhh simulate's, not a networked run's, and the form says which."""
    from fedhh_coordinator.runs import open_ledger

    form = ["privacy", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4", "--devices",
            "1600000", "--completion-rounds", "32"]
    code, out, err = run_cli([*form, "--json"], capsys)
    assert code == 0, err
    shown = json.loads(out)
    run, _ = with_most_completions(
        replace(RunConfig(), eps_agg=1.0, delta=1e-6, rounds=4, min_devices=1_600_000,
                completion_rounds=32), open_ledger, lambda ledger: ledger.eps_local)
    assert shown["eps_local"] > RunConfig.max_eps_local
    assert shown["networked_eps_local"] == open_ledger(run).eps_local == RunConfig.max_eps_local
    code, out, _ = run_cli(form, capsys)
    assert ("  note: a networked run (fedhh admin start, fedhh up) holds eps_local at its "
            "max_eps_local, 10 by default" in out), out
    assert "fedhh simulate runs at 10.6035" in out
    code, out, _ = run_cli(["privacy", "--eps-agg", "2", "--delta", "1e-6", "--rounds", "4",
                            "--devices", "1248", "--completion-rounds", "32"], capsys)
    assert "networked run" not in out


def test_a_networked_run_s_completion_rounds_are_those_it_keeps_at_its_cap(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Above the cap, the coordinator plans the completion rounds over its capped ledger: each
    needs 10 + ln(its weight) > 0, not the solved figure's. At 1,248 devices, eps_agg 20 and
    weight 3e-5 the solve keeps 1 completion round at 11.78 (11.78 - 10.41 > 0) where the
    coordinator keeps none (10 - 10.41 <= 0); before, the form gave only the 1."""
    from fedhh_coordinator.runs import open_ledger

    form = ["privacy", "--eps-agg", "20", "--delta", "1e-6", "--rounds", "4", "--devices",
            "1248", "--completion-rounds", "32", "--completion-weight", "3e-5"]
    code, out, err = run_cli([*form, "--json"], capsys)
    assert code == 0, err
    shown = json.loads(out)
    run, ledger = with_most_completions(
        replace(RunConfig(), eps_agg=20.0, delta=1e-6, rounds=4, min_devices=1248,
                completion_rounds=32, completion_weight=3e-5),
        open_ledger, lambda ledger: ledger.eps_local)
    assert shown["networked_completion_rounds"] == run.completion() == 0
    assert shown["networked_eps_local"] == ledger.eps_local == RunConfig.max_eps_local
    assert shown["completion_rounds"] == 1  # (fedhh simulate's, uncapped)
    code, out, _ = run_cli(form, capsys)
    assert ("it runs at 10 with 0 completion rounds, not 1 (each one's 10 + ln(its weight) "
            "must stay positive), and spends less than eps_agg" in out), out
