"""`fedhh admin results` of a run that is not done: its heavy hitters are those of the rounds
released so far, and stderr now says so (before, the JSON of a running or failed run read as
a finished run's list, save its ``state`` field). stdout stays the JSON; a done run's results
say nothing more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.v1 import coordinator_pb2 as pb


def _results(state: str) -> pb.Results:
    rounds = [pb.RoundSummary(round=1, attempt=1, state="released", participants=900),
              pb.RoundSummary(round=2, attempt=1, state="aborted", reason="too few"),
              pb.RoundSummary(round=2, attempt=2, state="released", participants=880)]
    return pb.Results(run_id="r1", state=state, rounds=rounds, heavy_hitters=[
        pb.HeavyHitter(item="👨‍👩‍👧‍👦", estimate=300.0, round=2, ended=True)])


@pytest.mark.parametrize(("state", "said"), [
    ("running", "run r1 is still running"), ("failed", "run r1 failed"),
    ("cancelled", "run r1 was cancelled"), ("done", None)])
def test_results_of_an_unfinished_run_say_they_are_so_far(
        recorder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        state: str, said: str | None) -> None:
    monkeypatch.setattr(Recorder, "results", lambda self, run_id: _results(state),
                        raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "results", "r1"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["state"] == state and data["heavyHitters"][0]["item"] == "👨‍👩‍👧‍👦"
    if said is None:
        assert captured.err == ""
    else:
        assert captured.err.startswith(f"fedhh admin results: note: {said}: its heavy "
                                       "hitters and cut prefixes are those of the 2 rounds "
                                       "released so far")
        assert ("wait r1" in captured.err) == (state == "running")
