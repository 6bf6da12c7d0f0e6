"""`fedhh admin results` carries the note `fedhh simulate` and `fedhh up` print when the
completion rounds lost many prefixes (``lost_in_completion_note``), as the JSON's
``completionNote``: before, a user reading these results of a run of URLs was told nothing of
--completion-weight. The field is always there ("" when nothing much was lost), and stdout
stays one JSON document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.config import RunConfig
from fedhh.rpc.run_config import to_proto
from fedhh.server.causes import lost_in_completion_note
from fedhh.v1 import coordinator_pb2 as pb

CONFIG = RunConfig()
MAIN = CONFIG.rounds
# Thresholds as a run of few devices has them: a completion round's many times a main round's
THRESHOLDS = {r: 50.0 if r <= MAIN else 429.0 for r in range(1, MAIN + 4)}
ROUNDS = [pb.RoundSummary(round=r, attempt=1, state="released", participants=400,
                          threshold=t) for r, t in THRESHOLDS.items()]
FOUND = 20  # (whole from the first completion round: 19 lost beside them are not most)


def _results(lost: int, found_in: int = MAIN + 1) -> pb.Results:
    """FOUND whole items found in round ``found_in`` (by default the first completion round),
    and ``lost`` prefixes that the first completion round kept and the second lost (each of
    them ``lost in round MAIN + 2``)."""
    hitters = [pb.HeavyHitter(item=f"w{i}", estimate=90.0 - i, round=found_in, ended=True)
               for i in range(FOUND)]
    prefixes = [pb.HeavyHitter(item=f"https://e{i}…", estimate=70.0 - i, round=MAIN + 1,
                               truncated=True, bits=96) for i in range(lost)]
    return pb.Results(run_id="r1", state="done", rounds=ROUNDS, heavy_hitters=hitters,
                      cut_prefixes=prefixes)


def _admin(recorder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
           results: pb.Results) -> dict:
    monkeypatch.setattr(Recorder, "results", lambda self, run_id: results, raising=False)
    monkeypatch.setattr(Recorder, "run", lambda self, run_id: pb.Run(
        run_id=run_id, state="done", config=to_proto(CONFIG)))
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "results", "r1"]) == 0
    return json.loads(capsys.readouterr().out)


def test_many_prefixes_lost_in_completion_rounds_are_noted(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    shown = _admin(recorder, monkeypatch, capsys, _results(24))
    assert {h["cause"] for h in shown["cutPrefixes"]} == {f"lost in round {MAIN + 2}"}
    expected = lost_in_completion_note([f"lost in round {MAIN + 2}"] * 24,
                                       [(MAIN + 1, False)] * FOUND, MAIN,
                                       CONFIG.completion_weight, THRESHOLDS)
    assert expected and shown["completionNote"] == expected


@pytest.mark.parametrize("lost", [0, 19])
def test_few_or_no_prefixes_lost_leave_the_field_empty(
        recorder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        lost: int) -> None:
    shown = _admin(recorder, monkeypatch, capsys, _results(lost))
    assert shown["completionNote"] == ""


def test_prefixes_lost_with_none_completed_are_noted_however_few(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every item found in a main round (round 2), 7 long prefixes lost in the completion rounds:
    the completion rounds lost all they took in. Before, below 20 lost nothing was said."""
    shown = _admin(recorder, monkeypatch, capsys, _results(7, found_in=2))
    assert shown["completionNote"].startswith("7 prefixes were lost in the completion rounds")
