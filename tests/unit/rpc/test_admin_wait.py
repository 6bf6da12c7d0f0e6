"""`AdminClient.wait` outlasts a coordinator that is briefly unreachable or too slow to answer
a poll (a loaded machine), and still gives up at its own timeout."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from fedhh.errors import StateError
from fedhh.rpc import admin_client
from fedhh.rpc.admin_client import AdminClient
from fedhh.v1 import coordinator_pb2 as pb


class _Failed(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


def _client(monkeypatch: pytest.MonkeyPatch, answers: Iterator[object]) -> AdminClient:
    monkeypatch.setattr(admin_client.time, "sleep", lambda _s: None)
    client = AdminClient("127.0.0.1:1", b"token")  # never dialled: polls are replaced

    def run(run_id: str, seen: str = "", wait_s: float = 0.0) -> pb.Run:
        answer = next(answers)
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, pb.Run)
        return answer

    monkeypatch.setattr(client, "run", run)
    return client


def test_slow_or_lost_polls_are_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([pb.Run(run_id="r", state="running"),
                    _Failed(grpc.StatusCode.DEADLINE_EXCEEDED),
                    _Failed(grpc.StatusCode.UNAVAILABLE),
                    pb.Run(run_id="r", state="done")])
    with _client(monkeypatch, answers) as client:
        assert client.wait("r", timeout_s=60).state == "done"


def test_other_errors_end_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([_Failed(grpc.StatusCode.NOT_FOUND)])
    with _client(monkeypatch, answers) as client, pytest.raises(grpc.RpcError):
        client.wait("r", timeout_s=60)


def test_an_idle_wait_outlasts_its_timeout_while_the_run_progresses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 10))  # every reading of the clock 10 s later
    monkeypatch.setattr(admin_client.time, "monotonic", lambda: next(clock))

    def progressing() -> Iterator[object]:
        for stage in range(6):  # 60 s and more of polls, a new stage each
            yield pb.Run(run_id="r", state="running", progress=pb.Progress(round=stage))
        yield pb.Run(run_id="r", state="done")

    with _client(monkeypatch, progressing()) as client:
        assert client.wait("r", timeout_s=25, idle=True).state == "done"
    with _client(monkeypatch, progressing()) as client, pytest.raises(
            StateError, match="not finished after 25 s"):
        client.wait("r", timeout_s=25)  # counted from the start
    stuck = iter([pb.Run(run_id="r", state="running")] * 10)
    with _client(monkeypatch, stuck) as client, pytest.raises(
            StateError, match="no progress in 25 s"):
        client.wait("r", timeout_s=25, idle=True)


def test_a_coordinator_that_never_answers_meets_the_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def forever() -> Iterator[object]:
        while True:
            yield _Failed(grpc.StatusCode.DEADLINE_EXCEEDED)

    with _client(monkeypatch, forever()) as client, pytest.raises(StateError,
                                                                  match="not finished after 0 s"):
        client.wait("r", timeout_s=0)
