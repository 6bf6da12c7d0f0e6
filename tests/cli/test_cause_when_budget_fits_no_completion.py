"""A prefix the rounds ran out on says when the privacy budget, not --completion-rounds, ended
them: one completion round more would get no positive local epsilon (eps_local + ln(its
weight) <= 0), so asking for more rounds adds none; one note below the list gives the figures
and what raises them (a row's width allows no more). Before, the networked defaults (eps_agg 1,
n_min 100: eps_local 1.524, the first completion round at 1.524 + ln 0.2 < 0) budgeted none,
every long item came back cut, and each read "no rounds left"."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.cli.up import _print_results
from fedhh.config import RunConfig, with_most_completions
from fedhh.rpc.run_config import to_proto
from fedhh.server.causes import (
    NO_COMPLETION,
    NO_MORE_COMPLETION,
    RAN_OUT,
    completion_budget_note,
    cut_cause,
    ran_out_cause,
)
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import open_ledger

LONG = "https://example.com/" + "abcdefghij" * 4  # past the main rounds' 60 bits


def _planned(**knobs: float) -> tuple[RunConfig, float]:
    """The run as the coordinator stores it (``create_run``'s planner) and its eps_local."""
    run, ledger = with_most_completions(RunConfig(min_devices=100, **knobs), open_ledger,
                                        lambda ledger: ledger.eps_local)
    return run, ledger.eps_local


def test_the_networked_defaults_name_the_budget() -> None:
    run, eps_local = _planned()
    assert run.completion() == 0 and RunConfig().completion() > 0  # (all dropped)
    cause = ran_out_cause(run, eps_local)
    assert cause == NO_COMPLETION and "rounds left" not in cause
    # (an item cut at the main rounds' width, or a prefix kept in the last round)
    assert cut_cause(5, 60, 60, 5, cause) == cause
    assert cut_cause(3, 40, 60, 5, cause) == "lost in round 4"
    note = completion_budget_note(run, eps_local, ["lost in round 4", cause])
    assert note is not None and note.startswith(
        "No completion round fits the privacy budget: the first would run at eps_local 1.524 "
        "+ ln 0.2 <= 0"), note
    assert "--eps-agg" in note and "n_min" in note
    assert completion_budget_note(run, eps_local, ["lost in round 4"]) is None  # (no row says it)


def test_rounds_budgeted_and_used_up_say_so_with_the_budget() -> None:
    run, eps_local = _planned(eps_agg=2.0)
    assert run.completion() == 1
    cause = ran_out_cause(run, eps_local)
    assert cause == NO_MORE_COMPLETION and cause.startswith(RAN_OUT)
    note = completion_budget_note(run, eps_local, [cause])
    assert note is not None and note.startswith(
        "No more than 1 completion round fits the privacy budget: the next would run at "
        "eps_local 2.473 + ln 0.05 <= 0"), note


def test_rounds_that_would_fit_keep_the_old_words() -> None:
    # (asked for fewer completion rounds than the budget holds: more rounds would run)
    run, eps_local = _planned(eps_agg=4.0, completion_rounds=2)
    assert run.completion() == 2 and ran_out_cause(run, eps_local) == RAN_OUT
    # (no completion rounds can run at all: the budget is not why)
    assert ran_out_cause(RunConfig(algorithm="triehh"), 1.0) == RAN_OUT
    # (a reply's unset eps_local: unknown)
    assert ran_out_cause(RunConfig(completion_rounds=0), 0.0) == RAN_OUT


def _admin_results(run: RunConfig, eps_local: float, recorder: Path,
                   monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """What `fedhh admin results r1` prints for a done run of ``run``, five rounds released and
    one cut prefix in the last."""
    released = [pb.RoundSummary(round=r, attempt=1, state="released", participants=100)
                for r in range(1, 6)]
    results = pb.Results(run_id="r1", state="done", rounds=released, heavy_hitters=[
        pb.HeavyHitter(item="https://example.com/ab⟨+2 bits⟩…", estimate=80.0, round=5,
                       truncated=True, bits=60)])
    monkeypatch.setattr(Recorder, "results", lambda self, run_id: results, raising=False)
    monkeypatch.setattr(Recorder, "run", lambda self, run_id: pb.Run(
        run_id=run_id, state="done", config=to_proto(run), eps_local=eps_local), raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "results", "r1"]) == 0
    shown: dict[str, Any] = json.loads(capsys.readouterr().out)
    return shown


def test_admin_results_name_the_budget(recorder: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run, eps_local = _planned()
    shown = _admin_results(run, eps_local, recorder, monkeypatch, capsys)
    assert shown["heavyHitters"][0]["cause"] == NO_COMPLETION
    assert shown["completionNote"] == completion_budget_note(run, eps_local, [NO_COMPLETION])


def test_simulate_names_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 400 users at eps_agg 1 budget 1 of the 32 completion rounds (eps_local 2.556; the 2nd
    # would run at 2.556 + ln 0.05 < 0): the long URL is kept, still unended, in the last round
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.jsonl"
    users.write_text("".join(json.dumps([LONG, "alice@example.com"] if u % 2 else [LONG]) + "\n"
                             for u in range(400)), encoding="utf-8")
    out = tmp_path / "r.json"
    assert main(["simulate", "--dataset", str(users), "--eps-agg", "1", "--seed", "1",
                 "--quiet", "--json", str(out)]) == 0
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert str(payload["privacy"]["completion_rounds"]).startswith("1 of 32")
    causes = {h["item"][:20]: h["cause"] for h in payload["cut_prefixes"]}
    assert causes["https://example.com/"] == NO_MORE_COMPLETION, causes
    assert ("No more than 1 completion round fits the privacy budget: the next would run at "
            "eps_local 2.556 + ln 0.05 <= 0") in payload["completion_note"]


def _up_output(run: RunConfig, eps_local: float, released: int, eps_spent: float,
               capsys: pytest.CaptureFixture[str]) -> str:
    """What `fedhh up` prints at the end of a done run of ``run`` with ``released`` rounds
    released and one cut prefix in the last."""
    rounds = [pb.RoundSummary(round=r, attempt=1, state="released", participants=100,
                              prefixes=1, segment_bits=12, domain_size=4096, kept=1)
              for r in range(1, released + 1)]
    reply = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=eps_spent,
                            eps_local=eps_local, rounds_released=released,
                            config=to_proto(run), rounds=rounds)
    cut = [pb.HeavyHitter(item="https://example…", estimate=85.0, round=released,
                          truncated=True, bits=60)]
    _print_results(reply, SimpleNamespace(heavy_hitters=[], cut_prefixes=cut))
    return capsys.readouterr().out


def test_up_names_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    run, eps_local = _planned()
    out = _up_output(run, eps_local, 5, 1.0, capsys)
    assert f"(round 5; {NO_COMPLETION}; cut at " in out
    assert str(completion_budget_note(run, eps_local, [NO_COMPLETION])) in out


def test_where_the_planner_alone_refuses_the_next_round_the_cause_is_the_budget(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """eps_agg 2.772 at n_min 100 keeps 1 completion round at eps_local 2.9966, which the 2nd
    (weight 0.05: 2.9966 + ln 0.05 > 0) passes; but with it the eps_local that meets eps_agg
    lies within the solver's resolution of -ln 0.05, and the planner keeps 1 however many are
    asked. Before, `fedhh admin results` said "no rounds left" and no note: more
    --completion-rounds, which add none."""
    run, eps_local = _planned(eps_agg=2.772)
    assert run.completion() == 1
    assert run.next_completion(eps_local) == (0.05, True)
    asked_more, _ = with_most_completions(RunConfig(min_devices=100, eps_agg=2.772,
                                                    completion_rounds=2), open_ledger,
                                          lambda ledger: ledger.eps_local)
    assert asked_more.completion() == 1
    shown = _admin_results(run, eps_local, recorder, monkeypatch, capsys)
    assert shown["heavyHitters"][0]["cause"] == NO_MORE_COMPLETION
    assert shown["completionNote"].startswith(
        "No more than 1 completion round fits the privacy budget: the next would lower "
        "eps_local to within 0.001 (the planner's resolution) of -ln 0.05 = 2.996, where its "
        "own local epsilon is 0"), shown["completionNote"]
    # (without the planner, as on the coordinator's event loop, the test alone decides)
    assert ran_out_cause(run, eps_local) == RAN_OUT
    # (where the planner funds the next round, more rounds extend: eps_agg 4 funds a 2nd)
    fewer = replace(RunConfig(min_devices=100, eps_agg=4.0), completion_rounds=1)
    assert ran_out_cause(fewer, open_ledger(fewer).eps_local, planner=True) == RAN_OUT


def test_up_asks_the_planner_where_it_alone_refuses_the_next_round(
        capsys: pytest.CaptureFixture[str]) -> None:
    """fedhh up's cut list at eps_agg 2.772 (the band above): the cause and the note are the
    planner's, as `fedhh admin results` gives them. Before, "no rounds left" and no note."""
    run, eps_local = _planned(eps_agg=2.772)
    out = _up_output(run, eps_local, 6, 2.772, capsys)
    assert f"(round 6; {NO_MORE_COMPLETION}; cut at " in out, out
    note = completion_budget_note(run, eps_local, [NO_MORE_COMPLETION], planner=True)
    assert note and "(the planner's resolution)" in note
    assert note in out, out
