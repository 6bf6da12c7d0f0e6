"""`fedhh admin results`: each truncated row (a cut prefix, or an item truncated at the code's
width) carries its ``cause``, as `fedhh simulate --json`, `fedhh up` and the dashboard's
downloads give it (before, these results alone listed a cut prefix with no word of why); a
whole item has none, and results without a truncated row ask nothing more of the coordinator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.config import RunConfig
from fedhh.rpc.run_config import to_proto
from fedhh.v1 import coordinator_pb2 as pb

RELEASED = [pb.RoundSummary(round=r, attempt=1, state="released", participants=400)
            for r in range(1, 7)]


def _results(cut: bool, truncated_item: bool) -> pb.Results:
    hitters = [pb.HeavyHitter(item="bob+x@example.com", estimate=43.0, round=3, ended=True)]
    if truncated_item:
        hitters.append(pb.HeavyHitter(item="https://ex⟨+2 bits⟩…", estimate=30.0, round=4,
                                      truncated=True, bits=60))
    prefixes = [pb.HeavyHitter(item="👩🏽⟨+6 bits⟩…", estimate=60.0, round=5, truncated=True,
                               bits=64),
                pb.HeavyHitter(item="user@b\\xc3…", estimate=31.0, round=6, truncated=True,
                               bits=68)] if cut else []
    return pb.Results(run_id="r1", state="done", rounds=RELEASED, heavy_hitters=hitters,
                      cut_prefixes=prefixes)


def _admin(recorder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
           results: pb.Results, config: RunConfig) -> dict:
    monkeypatch.setattr(Recorder, "results", lambda self, run_id: results, raising=False)
    monkeypatch.setattr(Recorder, "run", lambda self, run_id: (
        Recorder.calls.append(("run", run_id)),
        pb.Run(run_id=run_id, state="done", config=to_proto(config)))[1])
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "results", "r1"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cut_prefixes_say_why(recorder: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    shown = _admin(recorder, monkeypatch, capsys, _results(cut=True, truncated_item=False),
                   RunConfig())
    # (lost in the round after the one that kept it; kept in the last released round: none left)
    assert [h["cause"] for h in shown["cutPrefixes"]] == ["lost in round 6", "no rounds left"]
    assert "cause" not in shown["heavyHitters"][0]
    assert ("run", "r1") in Recorder.calls


def test_an_item_truncated_at_the_width_says_why(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # (without completion rounds the code is max_bits wide: a 60-bit row is cut at it)
    shown = _admin(recorder, monkeypatch, capsys, _results(cut=False, truncated_item=True),
                   RunConfig(completion_rounds=0, max_bits=60))
    assert "cause" not in shown["heavyHitters"][0]
    assert shown["heavyHitters"][1]["cause"] == "no rounds left"


def test_whole_results_ask_for_nothing_more(recorder: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    shown = _admin(recorder, monkeypatch, capsys, _results(cut=False, truncated_item=False),
                   RunConfig())
    assert "cause" not in shown["heavyHitters"][0] and shown["cutPrefixes"] == []
    assert ("run", "r1") not in Recorder.calls


def test_each_truncated_row_says_how_many_of_its_items_bytes_it_holds(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``prefix_bytes``, as `fedhh simulate --json` gives it: ``👩🏽`` is 8 bytes, ``user@b``
    and the first byte of a character 7; before, a row's … alone said it was cut."""
    shown = _admin(recorder, monkeypatch, capsys, _results(cut=True, truncated_item=True),
                   RunConfig())
    assert [h["prefix_bytes"] for h in shown["cutPrefixes"]] == [8, 7]
    assert shown["heavyHitters"][1]["prefix_bytes"] == 10  # ("https://ex")
    assert "prefix_bytes" not in shown["heavyHitters"][0]
