"""A device past its give-up time whose round another device of its process was told aborted
ends ``round_aborted`` with that reason, not ``timed_out`` (``participation.given_up``)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.device_client import participate
from fedhh.rpc.participation import ComputeTurns, ParticipationEnd, SessionResult, given_up
from fedhh.secagg import AdvertiseKeys, Stage
from fedhh.secagg.config import StageDeadlines
from fedhh.v1 import aggregator_pb2 as pb

SESSION = b"r/1/1"


class _Stub:
    """An aggregator's unary calls: the keys are accepted with no next request in hand."""

    def __init__(self) -> None:
        self.awaits = 0

    async def AdvertiseKeys(self, request: pb.AdvertiseKeysRequest,
                            timeout: float) -> pb.SubmitResponse:
        return pb.SubmitResponse(accepted=True)

    async def AwaitStage(self, request: object, timeout: float) -> None:
        self.awaits += 1
        raise AssertionError("a device past its give-up time asks nothing more")


def _device() -> SimpleNamespace:
    """A device whose round's stages all closed a minute ago (its process far behind)."""
    closed = int((time.time() - 60) * 1000)
    deadlines = StageDeadlines(closed, closed, closed, closed, closed)
    return SimpleNamespace(
        session_id=SESSION, device_id=1,
        config=SimpleNamespace(dimension=8, deadlines=deadlines, consistency_check=True),
        advertise_keys=lambda: AdvertiseKeys(SESSION, 1, b"\x01" * 32, b"\x02" * 32))


def _participate(computing: ComputeTurns) -> SessionResult:
    return asyncio.run(asyncio.wait_for(participate(
        _Stub(), _device(), np.array([3], dtype=np.int64),  # type: ignore[arg-type]
        identity_key=Ed25519PrivateKey.generate(),
        admission=None, overrun_s=0.0, computing=computing), 30))  # type: ignore[arg-type]


def test_a_device_past_its_give_up_time_ends_with_the_abort_its_process_was_told() -> None:
    """Before, it ended timed_out ("no request before the previous stage's deadline") while
    the abort another device of its process was told waited in ComputeTurns."""
    told = ComputeTurns()
    told.round_aborted(SESSION, "too_few_devices")
    result = _participate(told)
    assert (result.reached, result.outcome) == (Stage.SHARE_KEYS,
                                                ParticipationEnd.ROUND_ABORTED)
    assert result.detail == "too_few_devices (told to another device of this process)"
    # Without a known abort it did time out, as before.
    untold = _participate(ComputeTurns())
    assert untold.outcome is ParticipationEnd.TIMED_OUT


def test_only_a_timeout_is_relabelled_and_only_for_its_own_round() -> None:
    told = ComputeTurns()
    told.round_aborted(b"another round", "too_few_devices")
    timed_out = SessionResult(Stage.UNMASK, ParticipationEnd.TIMED_OUT, True, "no request")
    assert given_up(timed_out, told, SESSION) is timed_out
    assert given_up(timed_out, None, SESSION) is timed_out
    told.round_aborted(SESSION, "aborted by the operator")
    late = SessionResult(Stage.UNMASK, ParticipationEnd.LATE, True, "the stage closed")
    assert given_up(late, told, SESSION) is late
    assert given_up(timed_out, told, SESSION) == SessionResult(
        Stage.UNMASK, ParticipationEnd.ROUND_ABORTED, True,
        "aborted by the operator (told to another device of this process)")
