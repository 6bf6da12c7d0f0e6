"""`fedhh admin start` says when fewer devices have enrolled than the run's --min-devices
(before: the run was stored as pending, nothing was said, and each attempt's check-in aborted
short of it until the run failed a minute or more later). A note: devices may still enrol."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main

START = ["start", "--run-id", "r1", "--eps-agg", "2", "--target-devices", "450",
         "--min-devices", "400"]


def start(token: Path) -> int:
    return main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(token),
                 *START])


def test_too_few_enrolled_is_noted(recorder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Recorder.enrolled = 123
    assert start(recorder) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runId"] == "r1"  # stdout stays the JSON
    note = captured.err.splitlines()[-1]
    assert note.startswith("fedhh admin start: note: 123 devices have enrolled so far, "
                           "fewer than the run's --min-devices 400: "), note
    assert "fails after its first round's 5 attempts" in note and "admin ... devices" in note


@pytest.mark.parametrize("enrolled", [400, 10_000])
def test_enough_enrolled_says_nothing(recorder: Path, capsys: pytest.CaptureFixture[str],
                                      enrolled: int) -> None:
    Recorder.enrolled = enrolled
    assert start(recorder) == 0
    assert "enrolled" not in capsys.readouterr().err


class Unimplemented(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNIMPLEMENTED

    def details(self) -> str:
        return "Method not found!"


def test_a_coordinator_without_the_count_starts_the_run_quietly(
        recorder: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: Recorder) -> None:
        raise Unimplemented()

    monkeypatch.setattr(Recorder, "enrollment", refused)
    assert start(recorder) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runId"] == "r1" and "enrolled" not in captured.err
    assert ("start", "r1") in Recorder.calls
