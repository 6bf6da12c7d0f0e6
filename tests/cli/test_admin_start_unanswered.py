"""`fedhh admin start` on a coordinator too busy to answer in time.

StartRun plans the run's privacy accounting in the call (a 1,024-round run: 9 s on a quiet
2-core machine, 28 s at load 10), and the coordinator stores the run even when its caller has
given up. Before, the call's deadline was 60 s, the run's id was drawn at the coordinator, and
the bare DEADLINE_EXCEEDED said nothing: the operator who ran the command again started a
second run charging the same devices."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import grpc
import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.rpc import admin_client
from fedhh.v1 import coordinator_pb2 as pb

START = ["start", "--eps-agg", "2", "--target-devices", "450", "--min-devices", "400"]


class NotAnswered(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "Deadline Exceeded"


def start(token: Path, *flags: str) -> int:
    return main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(token),
                 *START, *flags])


@pytest.mark.parametrize("code", [grpc.StatusCode.DEADLINE_EXCEEDED,
                                  grpc.StatusCode.UNAVAILABLE])
@pytest.mark.parametrize("run_id", ["", "r1"])
def test_an_unanswered_start_names_the_run_and_says_repeating_it_is_safe(
        recorder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        code: grpc.StatusCode, run_id: str) -> None:
    asked: list[str] = []

    def unanswered(self: Recorder, config: Any, run_id: str = "", timeout_s: float = 0.0
                   ) -> None:
        asked.append(run_id)
        raise NotAnswered(code)

    monkeypatch.setattr(Recorder, "start_run", unanswered)
    with pytest.raises(SystemExit) as exited:
        start(recorder, *(("--run-id", run_id) if run_id else ()))
    assert exited.value.code != 0
    err = capsys.readouterr().err
    assert f"error: {code.name}: " in err.splitlines()[-1], err  # (the error itself after)
    [sent] = asked
    assert sent and (sent == run_id or not run_id)  # (drawn here when not given)
    again = "the same command" + ("" if run_id else f" with --run-id {sent}")
    assert f"fedhh admin start: note: run {sent} may have started" in err, err
    assert f"`fedhh admin ... status {sent}` shows it; {again} is safe" in err, err


def test_an_answered_start_of_no_run_id_sends_one(recorder: Path) -> None:
    assert start(recorder) == 0
    [sent] = [run_id for call, run_id in Recorder.calls if call == "start"]
    assert len(sent) == 16 and int(sent, 16) >= 0


@pytest.mark.parametrize("flags, waited", [((), 300.0),
                                           (("--timeout", "900"), 900.0)])
def test_start_waits_as_long_as_told(recorder: Path, monkeypatch: pytest.MonkeyPatch,
                                     flags: tuple[str, ...], waited: float) -> None:
    timeouts: list[float] = []
    answer = Recorder.start_run

    def timed(self: Recorder, config: Any, run_id: str = "", timeout_s: float = 0.0) -> Any:
        timeouts.append(timeout_s)
        return answer(self, config, run_id)

    monkeypatch.setattr(Recorder, "start_run", timed)
    assert start(recorder, *flags) == 0
    assert timeouts == [waited] and waited >= 300


@pytest.mark.parametrize("timeout", ["0", "-1", "1e9", "nan"])
def test_a_timeout_out_of_range_is_refused(recorder: Path, capsys: pytest.CaptureFixture[str],
                                           timeout: str) -> None:
    with pytest.raises(SystemExit) as exited:
        start(recorder, "--timeout", timeout)
    assert exited.value.code == 2
    assert "argument --timeout" in capsys.readouterr().err
    assert not [call for call, _ in Recorder.calls if call == "start"]


def test_the_client_draws_the_run_id_and_waits_for_planning() -> None:
    sent: list[tuple[str, float]] = []

    class Stub:
        def StartRun(self, request: pb.StartRunRequest, metadata: Any, timeout: float
                     ) -> pb.Run:
            sent.append((request.run_id, timeout))
            return pb.Run(run_id=request.run_id)

    client = admin_client.AdminClient("127.0.0.1:7000", b"0123456789abcdef0123")
    try:
        client.stub = Stub()  # type: ignore[assignment]
        client.start_run(pb.RunConfig())
        client.start_run(pb.RunConfig(), "r1", 900)
    finally:
        client.close()
    [(drawn, waited), again] = sent
    assert len(drawn) == 16 and waited == admin_client.START_TIMEOUT_S >= 300
    assert again == ("r1", 900)


def test_a_start_that_never_reached_the_coordinator_says_no_run_started(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped port: nothing listens there (a socket bound to it, not listening, refuses
    every connection). The call fails UNAVAILABLE at once, as before; it was told that the run
    may have started and how to repeat it safely, of a call that reached nobody."""
    token = tmp_path / "admin.token"
    token.write_text("0123456789abcdef0123\n")
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(SystemExit) as exited:
            main(["admin", "--coordinator", f"127.0.0.1:{port}", "--token-file", str(token),
                  *START, "--timeout", "600"])
    assert exited.value.code != 0
    err = capsys.readouterr().err
    assert f"note: the call never reached 127.0.0.1:{port}, so no run started" in err, err
    assert "may have started" not in err
    assert "error: UNAVAILABLE: " in err and "nothing listens at" in err


@pytest.mark.parametrize(("details", "sent"), [
    ("errors resolving coordinatr.example:7000: [field:hostname lookup error:address lookup "
     "failed for coordinatr.example:7000: Domain name not found]", False),
    ("DNS resolution failed for coordinatr.example:7000", False),
    ("Socket closed", True),
    ("recvmsg:Connection reset by peer", True),
])
def test_only_a_call_that_may_have_reached_it_may_have_started_a_run(
        recorder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        details: str, sent: bool) -> None:
    class Unavailable(NotAnswered):
        def details(self) -> str:
            return details

    def unanswered(self: Recorder, config: Any, run_id: str = "", timeout_s: float = 0.0
                   ) -> None:
        raise Unavailable(grpc.StatusCode.UNAVAILABLE)

    monkeypatch.setattr(Recorder, "start_run", unanswered)
    with pytest.raises(SystemExit):
        start(recorder)
    err = capsys.readouterr().err
    assert ("may have started" in err) is sent, err
    assert ("never reached" in err) is not sent, err
