"""fedhh.backoff: a retry loop's pauses, each drawn uniformly from zero to a bound that doubles
from the base to the cap with each try (full jitter), from a source a test may seed."""

from __future__ import annotations

import asyncio
import math
import os
import pickle
import random

import pytest

from fedhh import backoff
from fedhh.backoff import Backoff, Holdoff, full_jitter
from fedhh.rpc.participation import RetryPolicy


def test_the_pauses_stay_under_a_bound_that_doubles_to_the_cap() -> None:
    pauses = Backoff(0.1, 2.0, random.Random(1))
    bounds = []
    for _ in range(12):
        bounds.append(pauses.ceiling_s)
        pause = pauses.pause()
        assert 0 <= pause <= bounds[-1]
    assert bounds == [0.1, 0.2, 0.4, 0.8, 1.6] + [2.0] * 7
    pauses.reset()
    assert pauses.ceiling_s == 0.1
    # (a loop that has run for days: the doubling stops at the cap, no overflow)
    pauses.tries = 10_000
    assert pauses.ceiling_s == 2.0 and 0 <= pauses.pause() <= 2.0


def test_retrying_peers_are_spread_not_in_step() -> None:
    # 1,000 peers that lost a service at one moment, each with its own source, at their sixth
    # try: their pauses spread over [0, cap] (before, five of the services' loops paused the
    # bound itself: 1,000 equal pauses). Seeded, so the figures below are fixed.
    pauses = []
    for peer in range(1000):
        loop = Backoff(0.2, 5.0, random.Random(peer))
        for _ in range(5):
            loop.pause()
        pauses.append(loop.pause())
    assert len(set(pauses)) == 1000
    assert 0 <= min(pauses) < 0.1 and 4.9 < max(pauses) <= 5.0
    # each tenth of [0, 5] holds some: a deterministic run, no false failure
    assert all(any(k / 2 <= p < (k + 1) / 2 for p in pauses) for k in range(10))


def test_the_default_source_is_the_modules_and_may_be_replaced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Top(random.Random):
        def random(self) -> float:
            return 1.0

    monkeypatch.setattr(backoff, "JITTER", Top())
    assert Backoff(0.25, 4.0).pause() == 0.25


def test_sleep_waits_the_drawn_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(backoff.asyncio, "sleep", sleep)
    loop = Backoff(1.0, 8.0, random.Random(7))
    drawn = Backoff(1.0, 8.0, random.Random(7))
    for _ in range(5):
        asyncio.run(loop.sleep())
    assert slept == [drawn.pause() for _ in range(5)]


@pytest.mark.parametrize(("base", "cap"), [(-0.1, 1.0), (0.1, -1.0), (math.nan, 1.0)])
def test_a_bound_below_zero_is_refused_at_once(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="a backoff needs base, cap and tries >= 0"):
        Backoff(base, cap)
    with pytest.raises(ValueError, match="a backoff needs base, cap and tries >= 0"):
        Holdoff(base, cap)


def test_a_holdoff_doubles_with_each_failure_to_its_cap_and_ends_on_a_success() -> None:
    """The stores' fail-at-once windows (a reconnection, a lock wait): held from a failure for
    base * 2^n to the cap, exactly (no jitter), and over at its end or at a success."""
    held = Holdoff(1.0, 30.0)
    assert not held.held(0.0) and held.length_s == 0.0
    now, lengths = 100.0, []
    for _ in range(8):
        lengths.append(held.failed(now))
        assert held.held(now + lengths[-1] - 1e-9) and not held.held(now + lengths[-1])
        now += lengths[-1]
    assert lengths == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert held.length_s == 30.0
    held.failed(now)
    held.succeeded()
    assert not held.held(now) and held.length_s == 0.0 and held.failed(now) == 1.0
    held.failures = 10_000  # (days of an outage: the doubling stops at the cap)
    assert held.failed(now) == 30.0


def test_the_devices_retries_draw_from_the_same_formula() -> None:
    policy = RetryPolicy(initial_backoff_s=0.1, max_backoff_s=2.0, patient_max_backoff_s=30.0)
    for attempt in (0, 3, 4, 5, 9, 40):
        cap = 2.0 if attempt < policy.attempts else 30.0
        assert policy.backoff(attempt, random.Random(attempt)) == full_jitter(
            0.1, cap, attempt, random.Random(attempt))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_draws_its_own_pauses_not_its_parents() -> None:
    # (the states compared, not draws: equal only if the child was not reseeded; a reseed from
    # the OS's entropy repeats the parent's 19,937-bit state with probability about 2^-19937)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send its source's state and leave at once
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(backoff.JITTER.getstate(), out)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as child_out:
        child_state = pickle.load(child_out)
    os.waitpid(pid, 0)
    assert child_state != backoff.JITTER.getstate()
