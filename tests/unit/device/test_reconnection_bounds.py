"""A device comes back to a coordinator that restarted within a bound the coordinator's
check-in waits for (``fedhh_coordinator.lobby.RETURN_S``): its GetTask retries pause at most
10 s however many failed (60 s for calls the coordinator shed), and its channels reconnect at
least every 2 s. Before, RetryPolicy's patient cap (30 s) applied from the 5th failure on and
gRPC's own reconnection backoff grew to 120 s: with the coordinator down 20 s, 200 devices came
back over 32.6 s after it served again (82 in the first 10 s); now over 9.9 s."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from fedhh_coordinator.lobby import RETURN_S
from fedhh_device.fleet import GET_TASK_RETRY, GET_TASK_SHED_RETRY, Fleet, retry_pause
from fedhh_device.main import RECONNECT_MAX_MS, channel_options


class _Top:
    """A generator whose uniform draw is always the top of its range: the longest pause."""

    def uniform(self, low: float, high: float) -> float:
        return high


def test_get_task_pauses_keep_their_caps_after_many_failures() -> None:
    longest = [GET_TASK_RETRY.backoff(n, _Top()) for n in range(40)]  # type: ignore[arg-type]
    assert max(longest) == 10.0 and longest[-1] == 10.0
    shed = [GET_TASK_SHED_RETRY.backoff(n, _Top()) for n in range(40)]  # type: ignore[arg-type]
    assert max(shed) == 60.0


def test_channels_reconnect_within_the_bound_the_check_in_waits_for() -> None:
    assert dict(channel_options())["grpc.max_reconnect_backoff_ms"] == RECONNECT_MAX_MS
    assert GET_TASK_RETRY.max_backoff_s + RECONNECT_MAX_MS / 1000 < RETURN_S


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.RESOURCE_EXHAUSTED])
def test_an_enrolment_calls_retries_pause_as_get_tasks_do(code: grpc.StatusCode) -> None:
    """``Fleet._retry`` (the enrolment calls) draws its pauses from the GetTask policies. Before,
    it doubled its own (0.2 s to 10 s or 60 s, times 0.5 to 1.5): a pause up to half again
    past the caps the check-in's bound is read from."""
    fleet = Fleet([], None, {}, grpc.aio.insecure_channel, seed=3)
    paused: list[float] = []

    async def pause(seconds: float) -> None:
        paused.append(seconds)

    async def failing() -> None:
        if len(paused) < 12:
            raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), "down")

    fleet._pause = pause  # type: ignore[method-assign]
    asyncio.run(fleet._retry(failing))
    drawn = random.Random("fleet-jitter/3")
    assert paused == [retry_pause(code, n, drawn) for n in range(12)]
