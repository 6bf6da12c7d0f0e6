"""A fleet's devices ask a coordinator that answers "no task" again after a floor and a bounded,
jittered backoff: the fleet slept the answer's retry_after_ms as given, so a broken coordinator
answering "retry after 0 ms" had every device of the process re-poll it in a hot loop."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device import fleet as fleet_module
from fedhh_device.fleet import (
    NO_TASK_FLOOR_S,
    NO_TASK_MAX_BACKOFF_S,
    NO_TASK_MAX_WAIT_S,
    Fleet,
    Identity,
    no_task_pause,
)
from fedhh_device.report import DeviceData

CALLS = 12


class Answers:
    """A coordinator whose GetTask answers at once with ``answer``, ``CALLS`` times, then has
    the fleet stop."""

    def __init__(self, answer: pb.GetTaskResponse) -> None:
        self.answer = answer
        self.calls = 0
        self.fleet: Fleet | None = None

    async def GetTask(self, request: pb.GetTaskRequest, metadata: Any = None
                      ) -> pb.GetTaskResponse:
        self.calls += 1
        if self.calls >= CALLS and self.fleet is not None:
            self.fleet.stop.set()
        return self.answer


def _pauses(answer: pb.GetTaskResponse, seed: int | None = 7) -> tuple[list[float], Fleet]:
    """The pauses one device of a fleet takes between its GetTasks, each answered ``answer``."""
    coordinator = Answers(answer)
    data = DeviceData(("word",), np.ones(1, dtype=np.int64))
    fleet = Fleet([(5, data)], coordinator, {}, lambda address: None, seed=seed)
    coordinator.fleet = fleet
    fleet._identities[5] = Identity(9, b"credential", Ed25519PrivateKey.generate(), b"")
    pauses: list[float] = []

    async def pause(seconds: float) -> None:  # (recorded, not slept)
        pauses.append(seconds)

    fleet._pause = pause  # type: ignore[method-assign]

    async def run() -> None:
        await asyncio.wait_for(fleet._device(5, data), 60)

    asyncio.run(run())
    assert coordinator.calls == CALLS
    return pauses, fleet


def test_an_answer_of_nothing_and_no_wait_is_asked_again_after_a_growing_backoff() -> None:
    pauses, _ = _pauses(pb.GetTaskResponse())  # (neither a task nor a wait)
    assert len(pauses) == CALLS
    # Never sooner than the floor; each at most 1.5 times its step, the step doubling from the
    # floor up to the cap.
    for i, seconds in enumerate(pauses):
        step = min(NO_TASK_MAX_BACKOFF_S, NO_TASK_FLOOR_S * 2 ** i)
        assert step <= seconds < 1.5 * step, (i, seconds)
    assert max(pauses) < 1.5 * NO_TASK_MAX_BACKOFF_S
    assert pauses[-1] >= NO_TASK_MAX_BACKOFF_S


def test_retry_after_zero_is_floored_and_a_held_answer_starts_afresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pauses, _ = _pauses(pb.GetTaskResponse(retry_after_ms=0))
    assert min(pauses) >= NO_TASK_FLOOR_S
    # Answers that the coordinator held (a long-poll that ran its course) are not a broken
    # coordinator: each is asked again after its floor, without doubling.
    monkeypatch.setattr(fleet_module, "NO_TASK_HELD_S", 0.0)
    held, _ = _pauses(pb.GetTaskResponse(retry_after_ms=0))
    assert all(NO_TASK_FLOOR_S <= s < 1.5 * NO_TASK_FLOOR_S for s in held), held


def test_a_task_the_device_refuses_is_not_asked_again_at_once() -> None:
    # (signed by no one: refused, then handed out again by this broken coordinator)
    refused = pb.GetTaskResponse(task=pb.SignedTask(task=b"not a task"))
    pauses, _ = _pauses(refused)
    assert len(pauses) == CALLS and min(pauses) >= NO_TASK_FLOOR_S
    assert pauses[-1] >= NO_TASK_MAX_BACKOFF_S


def test_the_jitter_is_seeded_in_simulation_and_from_the_os_otherwise() -> None:
    first, _ = _pauses(pb.GetTaskResponse(), seed=11)
    again, _ = _pauses(pb.GetTaskResponse(), seed=11)
    other, _ = _pauses(pb.GetTaskResponse(), seed=12)
    assert first == again and first != other
    _, deployed = _pauses(pb.GetTaskResponse(), seed=None)
    assert isinstance(deployed._jitter, random.SystemRandom)


def test_no_task_pause_honours_the_coordinator_within_its_bounds() -> None:
    rng = random.Random(3)
    assert 30.0 <= no_task_pause(30_000, 0, rng) < 45.0
    # A huge wait (retry_after_ms is a uint32: up to 49 days) is bounded.
    assert NO_TASK_MAX_WAIT_S <= no_task_pause(2**32 - 1, 0, rng) < 1.5 * NO_TASK_MAX_WAIT_S
    assert NO_TASK_MAX_BACKOFF_S <= no_task_pause(0, 10**6, rng) < 1.5 * NO_TASK_MAX_BACKOFF_S
    with pytest.raises(ValueError, match="quick_answers must be >= 0, got -1"):
        no_task_pause(0, -1, rng)
