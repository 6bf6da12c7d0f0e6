"""A device's wait for its next request answered without one (not selected, the stage closed,
the round aborted) ends its participation alike over the unary calls and the session stream
(``participation.not_ready``). Before, the stream kept a table of its own: a device that was not
selected, or whose round aborted without a reason, reported the detail "unexpected answer 3"
(or 5), which the device process's failure summary listed as the reason."""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace
from typing import Any

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc import device_stream
from fedhh.rpc.aggregator_wire import CHALLENGE_BYTES
from fedhh.rpc.device_client import participate
from fedhh.rpc.device_stream import participate_stream
from fedhh.rpc.participation import ParticipationEnd, RetryPolicy, SessionResult, not_ready
from fedhh.secagg import AdvertiseKeys, Stage
from fedhh.secagg.config import Admission, StageDeadlines
from fedhh.v1 import aggregator_pb2 as pb

SESSION = b"r/1/1"
ANSWERS: dict[int, tuple[ParticipationEnd, str]] = {
    pb.AWAIT_STATUS_NOT_SELECTED: (ParticipationEnd.NOT_SELECTED, ""),
    pb.AWAIT_STATUS_CLOSED: (ParticipationEnd.LATE, "the stage closed"),
    pb.AWAIT_STATUS_ABORTED: (ParticipationEnd.ROUND_ABORTED, ""),
    pb.AWAIT_STATUS_UNSPECIFIED: (ParticipationEnd.REJECTED, "unexpected answer 0"),
}


def test_the_one_reading() -> None:
    for status, (outcome, detail) in ANSWERS.items():
        assert not_ready(Stage.MASKED_INPUT, status) == SessionResult(
            Stage.MASKED_INPUT, outcome, False, detail)
    assert not_ready(Stage.UNMASK, pb.AWAIT_STATUS_ABORTED, "too_few_devices", True) == \
        SessionResult(Stage.UNMASK, ParticipationEnd.ROUND_ABORTED, True, "too_few_devices")
    # (a reason goes with an abort only)
    assert not_ready(Stage.UNMASK, pb.AWAIT_STATUS_CLOSED, "x").detail == "the stage closed"


def _device() -> Any:
    """A device whose stages are open for a minute; its keys are all it computes here."""
    until = int((time.time() + 60) * 1000)
    deadlines = StageDeadlines(until, until, until, until, until)
    return SimpleNamespace(
        session_id=SESSION, device_id=1,
        config=SimpleNamespace(dimension=8, deadlines=deadlines, consistency_check=False),
        advertise_keys=lambda: AdvertiseKeys(SESSION, 1, b"\x01" * 32, b"\x02" * 32))


class _Unary:
    """An aggregator's unary calls: the keys accepted, the wait answered ``status``."""

    def __init__(self, answer: pb.AwaitStageResponse) -> None:
        self.answer = answer

    async def AdvertiseKeys(self, request: Any, timeout: float) -> pb.SubmitResponse:
        return pb.SubmitResponse(accepted=True)

    async def AwaitStage(self, request: Any, timeout: float) -> pb.AwaitStageResponse:
        return self.answer


class _Call:
    """A session stream: its challenge (the keys ride in the open), then ``events``."""

    def __init__(self, events: list[pb.SessionEvent]) -> None:
        self.events = [pb.SessionEvent(challenge=b"c" * CHALLENGE_BYTES, keys_in_open=True),
                       *events]
        self.written: list[pb.SessionMessage] = []

    async def read(self) -> Any:
        return self.events.pop(0) if self.events else grpc.aio.EOF

    async def write(self, message: pb.SessionMessage) -> None:
        self.written.append(message)

    def cancel(self) -> None:
        pass


class _Stream:
    def __init__(self, events: list[pb.SessionEvent]) -> None:
        self.events = events

    def Session(self, timeout: float) -> _Call:
        return _Call(self.events)


def _over(transport: str, answer: pb.AwaitStageResponse | list[pb.SessionEvent]
          ) -> SessionResult:
    """How a device ends whose wait for the share-keys request is answered ``answer`` (or,
    over the stream, whose stream's events after the challenge are ``answer``)."""
    key = Ed25519PrivateKey.generate()
    admission = Admission(1, b"k" * 32, b"c" * 32, b"s" * 32, b"")
    ones = np.array([3], dtype=np.int64)
    if transport == "unary":
        assert isinstance(answer, pb.AwaitStageResponse)
        run = participate(_Unary(answer), _device(), ones, identity_key=key,
                          admission=admission, transport="unary")
    else:
        events = answer if isinstance(answer, list) else [
            pb.SessionEvent(next=answer, stage=pb.SECAGG_STAGE_SHARE_KEYS)]
        run = participate_stream(_Stream(events), _device(), ones, identity_key=key,
                                 admission=admission, drop_at=None, retry=RetryPolicy(),
                                 overrun_s=0.0, chunk_bytes=1024, rng=random.Random(1),
                                 observe=None)
    return asyncio.run(asyncio.wait_for(run, 30))


@pytest.mark.parametrize("transport", ["unary", "stream"])
@pytest.mark.parametrize("status", sorted(ANSWERS))
def test_both_transports_end_alike(transport: str, status: int) -> None:
    answer = pb.AwaitStageResponse(status=status)  # type: ignore[arg-type]
    outcome, detail = ANSWERS[status]
    assert _over(transport, answer) == SessionResult(Stage.SHARE_KEYS, outcome, False, detail)


@pytest.mark.parametrize("transport", ["unary", "stream"])
def test_an_abort_reports_its_reason(transport: str) -> None:
    answer = pb.AwaitStageResponse(status=pb.AWAIT_STATUS_ABORTED,
                                   abort_reason="too_few_devices")
    assert _over(transport, answer) == SessionResult(
        Stage.SHARE_KEYS, ParticipationEnd.ROUND_ABORTED, False, "too_few_devices")


def test_a_refused_message_ends_the_stream_at_that_messages_stage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The share-keys message refused late (its stage closed before it got in) ends the device
    at SHARE_KEYS, as the unary call that submits it does, though the stream has moved on to
    wait for the masked-input request when the refusal comes. Before, it said MASKED_INPUT, and
    the device process logged "late at MASKED_INPUT" for a refused share-keys message."""
    monkeypatch.setattr(device_stream, "_answer", lambda *args: [pb.SessionMessage()])

    def refused(stage: str) -> pb.SessionEvent:
        return pb.SessionEvent(refused=pb.SessionRefusal(
            code=grpc.StatusCode.FAILED_PRECONDITION.value[0],
            details=f"message rejected (late): {stage} has closed"))

    ready = pb.SessionEvent(next=pb.AwaitStageResponse(status=pb.AWAIT_STATUS_READY),
                            stage=pb.SECAGG_STAGE_SHARE_KEYS)
    late = "FAILED_PRECONDITION: message rejected (late): {} has closed"
    assert _over("stream", [ready, refused("SHARE_KEYS")]) == SessionResult(
        Stage.SHARE_KEYS, ParticipationEnd.LATE, False, late.format("SHARE_KEYS"))
    # (the keys, which ride in the open: refused so, the device ends at ADVERTISE_KEYS)
    assert _over("stream", [refused("ADVERTISE_KEYS")]) == SessionResult(
        Stage.ADVERTISE_KEYS, ParticipationEnd.LATE, False, late.format("ADVERTISE_KEYS"))
