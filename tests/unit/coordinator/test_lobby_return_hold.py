"""After the coordinator starts, a check-in whose window ends short of min_devices is held for
the devices that asked its previous process, up to the bound they come back within
(``Lobby.expect_return``, ``lobby.RETURN_S``), and closes after a quiet spell once it holds
min_devices. Before, the first check-in after a restart closed at its window: 218 of 450
devices were back in its 10 s, and the attempt aborted for too few, spending one of the
round's attempts."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import lobby as lobby_module
from fedhh_coordinator.lobby import Lobby


def keys(i: int) -> tuple[bytes, bytes]:
    return bytes([i]) * 32, bytes([i + 100]) * 32


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, 10))  # type: ignore[arg-type]


async def _held(lobby: Lobby) -> None:
    while not lobby.is_held:  # (a readiness wait: the window has run out, the hold begun)
        await asyncio.sleep(0.005)


def test_a_check_in_short_after_the_start_waits_for_the_devices_coming_back() -> None:
    async def scenario() -> list[int]:
        lobby = Lobby()
        lobby.expect_return(time.time() + 60)
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=0.05, quiet_s=0.1,
                                                       min_size=2))
        await asyncio.sleep(0)
        first = asyncio.create_task(lobby.wait_for_task(1, keys(1), 30))
        await _held(lobby)
        assert not collecting.done() and lobby.cohort_size == 1
        second = asyncio.create_task(lobby.wait_for_task(2, keys(2), 30))
        # (min_devices in: it closes after the quiet spell, not at the 60 s bound)
        cohort = await collecting
        lobby.clear()
        await asyncio.gather(first, second)
        return cohort

    assert run(scenario()) == [1, 2]


def test_no_hold_past_the_bound_nor_with_enough_devices() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        lobby.expect_return(time.time() - 1)  # (the devices had their time)
        assert await lobby.collect(capacity=2, window_s=0.05, min_size=2) == []
        assert not lobby.is_held
        lobby.clear()
        lobby.expect_return(time.time() + 60)
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=0.1, min_size=1))
        await asyncio.sleep(0)
        waiter = asyncio.create_task(lobby.wait_for_task(7, keys(7), 30))
        assert await collecting == [7]  # (min_devices at the window's end: closed as before)
        lobby.clear()
        await waiter

    run(scenario())


def test_an_earlier_bound_does_not_shorten_a_later_one() -> None:
    lobby = Lobby()
    lobby.expect_return(time.time() + 200)
    later = lobby._returning_until
    lobby.expect_return(time.time() + 100)
    assert lobby._returning_until == later


def test_a_wall_clock_stepped_back_does_not_lengthen_the_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound is a span from the start (RETURN_S), held on the monotonic clock. Before, it
    was a wall-clock instant read again as the check-in opened: a clock stepped back an hour
    after the start (NTP correcting a clock that ran ahead) held a check-in short of devices
    an hour and 0.2 s instead of 0.2 s."""
    async def scenario() -> list[int]:
        lobby = Lobby()
        lobby.expect_return(time.time() + 0.2)
        stepped = SimpleNamespace(time=lambda: real_time() - 3600, monotonic=time.monotonic)
        monkeypatch.setattr(lobby_module, "time", stepped)
        return await lobby.collect(capacity=3, window_s=0.05, min_size=2)

    real_time = time.time
    assert run(scenario()) == []


def test_a_wall_clock_stepped_ahead_does_not_cut_the_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Likewise a clock stepped ahead an hour ended the hold at once."""
    async def scenario() -> None:
        lobby = Lobby()
        lobby.expect_return(time.time() + 60)
        stepped = SimpleNamespace(time=lambda: real_time() + 3600, monotonic=time.monotonic)
        monkeypatch.setattr(lobby_module, "time", stepped)
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=0.05, min_size=2))
        await _held(lobby)
        collecting.cancel()

    real_time = time.time
    run(scenario())


def _stepped(monkeypatch: pytest.MonkeyPatch, by_s: float) -> None:
    """The wall clock the lobby reads stepped by ``by_s`` (its monotonic clock as it is)."""
    real_time = time.time
    monkeypatch.setattr(lobby_module, "time", SimpleNamespace(
        time=lambda: real_time() + by_s, monotonic=time.monotonic))


@pytest.mark.parametrize("hold", ["deliver", "expect"])
def test_a_wall_clock_stepped_back_does_not_lengthen_the_hold_for_a_busy_cohort(
        hold: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hold for the latest cohort's members (``deliver``, and ``expect`` after a restart)
    is held on the monotonic clock, as the one for devices coming back is. Before, its bound
    (the round's last deadline, Unix time) was read against the wall clock as each check-in
    opened: a clock stepped back an hour held a check-in short of devices an hour and 0.2 s
    instead of 0.2 s."""
    async def scenario() -> list[int]:
        lobby = Lobby()
        if hold == "deliver":
            lobby.deliver({1: pb.SignedTask()}, time.time() + 0.2)
        else:
            assert lobby.expect([1], time.time() + 0.2)
        _stepped(monkeypatch, -3600)
        return await lobby.collect(capacity=3, window_s=0.05, min_size=2)

    assert run(scenario()) == []


def test_a_wall_clock_stepped_ahead_does_not_cut_the_hold_for_a_busy_cohort(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        lobby = Lobby()
        lobby.deliver({1: pb.SignedTask()}, time.time() + 60)
        _stepped(monkeypatch, 3600)
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=0.05, min_size=2))
        await _held(lobby)
        collecting.cancel()

    run(scenario())
