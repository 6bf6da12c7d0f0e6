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
    """A session stream: its challenge (the keys ride in the open), then ``answer``."""

    def __init__(self, answer: pb.AwaitStageResponse) -> None:
        self.events = [pb.SessionEvent(challenge=b"c" * CHALLENGE_BYTES, keys_in_open=True),
                       pb.SessionEvent(next=answer, stage=pb.SECAGG_STAGE_SHARE_KEYS)]
        self.written: list[pb.SessionMessage] = []

    async def read(self) -> Any:
        return self.events.pop(0) if self.events else grpc.aio.EOF

    async def write(self, message: pb.SessionMessage) -> None:
        self.written.append(message)

    def cancel(self) -> None:
        pass


class _Stream:
    def __init__(self, answer: pb.AwaitStageResponse) -> None:
        self.answer = answer

    def Session(self, timeout: float) -> _Call:
        return _Call(self.answer)


def _over(transport: str, answer: pb.AwaitStageResponse) -> SessionResult:
    key = Ed25519PrivateKey.generate()
    admission = Admission(1, b"k" * 32, b"c" * 32, b"s" * 32, b"")
    ones = np.array([3], dtype=np.int64)
    if transport == "unary":
        run = participate(_Unary(answer), _device(), ones, identity_key=key,
                          admission=admission, transport="unary")
    else:
        run = participate_stream(_Stream(answer), _device(), ones, identity_key=key,
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
