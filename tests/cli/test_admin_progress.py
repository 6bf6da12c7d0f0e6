"""`fedhh admin wait` and `cancel` as an operator meets them: wait was silent for the minutes a
run takes (in the compose stack, over two minutes with a terminal showing nothing); cancel of a
running run answered "state": "running" and nothing else, which reads as a refusal. stdout
stays the JSON either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.v1 import coordinator_pb2 as pb


def progress_of_a_run() -> list[pb.Run]:
    """What the coordinator answers while a run goes through check-in, two stages and the
    release of its first round, then ends."""
    released = pb.RoundSummary(round=1, attempt=1, state="released", participants=1387,
                               kept=5, finished=2, seconds=18)
    return [
        pb.Run(run_id="r1", state="running",
               progress=pb.Progress(round=1, attempt=1, phase="check-in", devices=40)),
        pb.Run(run_id="r1", state="running",
               progress=pb.Progress(round=1, attempt=1, phase="secure aggregation",
                                    stage="SHARE_KEYS", devices=1387)),
        pb.Run(run_id="r1", state="done", rounds=[released]),
    ]


def test_wait_tells_each_step_on_stderr_and_prints_only_the_json(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def wait(self: Recorder, run_id: str, timeout_s: float, on_change: Any = None,
             idle: bool = False) -> pb.Run:
        assert on_change is not None  # before: none, so nothing was told
        runs = progress_of_a_run()
        for run in runs:
            on_change(run)
        return runs[-1]

    monkeypatch.setattr(Recorder, "wait", wait, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "wait", "r1"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == "done"
    assert captured.err.splitlines() == [
        "  round 1 attempt 1: check-in (40 devices so far)",
        "  round 1 attempt 1: secure aggregation with 1387 devices: share keys",
        "  round 1 attempt 1: released: 1387 contributors, 5 kept, 2 found (18 s)",
    ]


@pytest.mark.parametrize(("state", "noted"), [("running", True), ("cancelled", False)])
def test_cancel_of_a_running_run_says_when_it_stops(
        recorder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        state: str, noted: bool) -> None:
    def cancel(self: Recorder, run_id: str) -> pb.Run:
        return pb.Run(run_id=run_id, state=state)

    monkeypatch.setattr(Recorder, "cancel", cancel, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "cancel", "r3"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == state
    # (at once in a check-in since ac88ad6: before, the note said only "when its attempt in
    # progress ends", which a cancel during the check-in's window no longer waits for)
    assert (captured.err == "fedhh admin cancel: note: run r3 stops when its round under way "
            "ends (at once if the round is still in its check-in, nothing charged); "
            "`fedhh admin ... wait r3` returns once it has\n") is noted
    assert (captured.err == "") is not noted


@pytest.mark.parametrize("state", ["done", "failed"])
def test_cancel_of_a_run_that_had_ended_says_it_changed_nothing(
        recorder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        state: str) -> None:
    """Before: the ended run's JSON alone, exit 0, as if it had been cancelled."""
    def cancel(self: Recorder, run_id: str) -> pb.Run:
        return pb.Run(run_id=run_id, state=state)

    monkeypatch.setattr(Recorder, "cancel", cancel, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "cancel", "r3"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == state
    assert captured.err == (f"fedhh admin cancel: note: run r3 had already ended ({state}): "
                            "the cancel changed nothing\n")


def test_ctrl_c_on_wait_says_the_run_goes_on(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a traceback ending in admin_client's time.sleep, and no word of the run, which
    the coordinator goes on running."""
    def wait(self: Recorder, run_id: str, timeout_s: float, on_change: Any = None,
             idle: bool = False) -> pb.Run:
        on_change(progress_of_a_run()[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(Recorder, "wait", wait, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "wait", "r7"]) == 130
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "  round 1 attempt 1: check-in (40 devices so far)",
        "fedhh admin wait: interrupted; run r7 goes on at the coordinator (`fedhh admin ... status "
        "r7` shows it, `cancel r7` stops it)",
    ]


def test_ctrl_c_on_another_client_command_is_one_line(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def runs(self: Recorder) -> list[pb.Run]:
        raise KeyboardInterrupt

    monkeypatch.setattr(Recorder, "runs", runs, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "list"]) == 130
    assert capsys.readouterr().err == "fedhh admin list: interrupted\n"
