"""The coordinator's check-in: who joins a round's cohort, with which round keys, and when a
device that already holds its task waits."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest

from fedhh.errors import ConfigError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.lobby import Lobby


def keys(i: int) -> tuple[bytes, bytes]:
    return bytes([i]) * 32, bytes([i + 100]) * 32


def wide_keys(i: int) -> tuple[bytes, bytes]:
    return i.to_bytes(4, "big") * 8, (i + 1_000_000).to_bytes(4, "big") * 8


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, 10))  # type: ignore[arg-type]


def test_the_cohort_keeps_the_keys_each_device_joined_with() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=2, window_s=5))
        waiters = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 5)) for d in (7, 8)]
        assert await collecting == [7, 8]
        assert lobby.round_keys(7) == keys(7) and lobby.round_keys(8) == keys(8)
        # A retried call of a member with other keys changes nothing: the round commits to
        # the keys of the call that joined.
        retry = asyncio.create_task(lobby.wait_for_task(7, keys(9), 5))
        task = pb.SignedTask(task=b"task-7")
        lobby.deliver({7: task})
        assert await waiters[0] == task and await retry == task
        assert await waiters[1] is None  # a member without a task gets nothing
        assert lobby.round_keys(7) == keys(7)
        lobby.clear()
        with pytest.raises(KeyError):
            lobby.round_keys(7)

    run(scenario())


def test_keys_already_presented_by_another_device_are_refused() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=5))
        await asyncio.sleep(0)  # let check-in open
        first = asyncio.create_task(lobby.wait_for_task(1, keys(1), 5))
        await asyncio.sleep(0)
        for copied in (keys(1), (keys(1)[1], bytes(32)), (bytes(32), keys(1)[0])):
            with pytest.raises(ConfigError, match="already presented"):
                await lobby.wait_for_task(2, copied, 5)
        assert lobby.cohort_size == 1
        second = asyncio.create_task(lobby.wait_for_task(2, keys(2), 5))
        third = asyncio.create_task(lobby.wait_for_task(3, keys(3), 5))
        assert await collecting == [1, 2, 3]
        lobby.clear()
        assert [await w for w in (first, second, third)] == [None, None, None]

    run(scenario())


def test_a_device_holding_its_task_waits_for_the_round_to_end() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=1, window_s=5))
        await asyncio.sleep(0)
        waiter = asyncio.create_task(lobby.wait_for_task(1, keys(1), 5))
        await collecting
        task = pb.SignedTask(task=b"task-1")
        lobby.deliver({1: task})
        assert await waiter == task
        # Asking again without saying it holds the task: the same task (a lost response).
        assert await lobby.wait_for_task(1, keys(1), 5) == task
        known = hashlib.sha256(task.task).digest()
        holding = asyncio.create_task(lobby.wait_for_task(1, keys(1), 0.5, known))
        await asyncio.sleep(0.01)
        assert not holding.done()
        lobby.clear()
        assert await holding is None  # no round open after this one

    run(scenario())


def test_the_cohort_is_drawn_at_random_from_an_oversubscribed_pool() -> None:
    """100 Sybils that poll first and 100 honest devices, a cohort of 100 from the pool of 200:
    first come first served would seat no honest device; a uniform draw seats
    Hypergeometric(200, 100, 100) of them, below 25 with probability < 1e-12."""
    async def scenario() -> list[int]:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=100, window_s=10,
                                                       pool_size=200, quiet_s=5))
        await asyncio.sleep(0)
        sybils = [asyncio.create_task(lobby.wait_for_task(d, wide_keys(d), 10))
                  for d in range(1000, 1100)]
        await asyncio.sleep(0)
        honest = [asyncio.create_task(lobby.wait_for_task(d, wide_keys(d), 10))
                  for d in range(1, 101)]
        cohort = await collecting  # the pool is full: it closes at once
        lobby.deliver({d: pb.SignedTask(task=bytes([d % 256])) for d in cohort})
        answers = await asyncio.gather(*sybils, *honest)
        seated = [d for d, a in zip([*range(1000, 1100), *range(1, 101)], answers, strict=True)
                  if a is not None]
        assert sorted(seated) == cohort
        return cohort

    cohort = run(scenario())
    assert len(cohort) == 100
    assert sum(d < 1000 for d in cohort) >= 25  # type: ignore[operator,union-attr]


def test_check_in_closes_after_a_quiet_spell_once_the_cohort_can_be_filled() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        loop = asyncio.get_running_loop()
        started = loop.time()
        collecting = asyncio.create_task(lobby.collect(capacity=2, window_s=30, pool_size=4,
                                                       quiet_s=0.2))
        await asyncio.sleep(0)
        waiters = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 30)) for d in (1, 2)]
        assert await collecting == [1, 2]
        assert loop.time() - started < 10  # long before the window's end
        lobby.clear()
        assert await asyncio.gather(*waiters) == [None, None]

    run(scenario())


def test_ineligible_devices_never_join() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(
            capacity=2, window_s=5, quiet_s=0.1, eligible=lambda d: d != 2))
        await asyncio.sleep(0)
        waiters = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 5)) for d in (1, 2, 3)]
        assert await collecting == [1, 3]
        assert await waiters[1] is None
        lobby.clear()

    run(scenario())


def test_a_refused_device_is_told_once_when_the_check_in_closes() -> None:
    """A device the open check-in refuses is not answered at once (it would ask again and again
    while check-in stays open) but when check-in closes; asking again then waits for the next
    check-in, and joins it, in one call."""
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(
            capacity=1, window_s=5, pool_size=2, quiet_s=0.3, eligible=lambda d: d != 2))
        await asyncio.sleep(0)
        refused = asyncio.create_task(lobby.wait_for_task(2, keys(2), 30))
        member = asyncio.create_task(lobby.wait_for_task(1, keys(1), 30))
        await asyncio.sleep(0.1)
        assert not refused.done()  # held while check-in is open
        assert await collecting == [1]
        # (at the close, not at the end of its 30 s wait: within a few turns of the loop, a
        # bound that a loaded machine's stalls do not stretch as they stretch the time)
        for _ in range(20):
            await asyncio.sleep(0)
        assert refused.done() and refused.result() is None
        lobby.deliver({1: pb.SignedTask(task=b"task-1")})
        assert (await member).task == b"task-1"
        # Told once: the next call waits (it is not answered while the round runs) ...
        again = asyncio.create_task(lobby.wait_for_task(2, keys(2), 30))
        await asyncio.sleep(0.1)
        assert not again.done()
        # ... and joins the next check-in, where it is eligible, in the same call.
        lobby.clear()
        collecting = asyncio.create_task(lobby.collect(capacity=1, window_s=5, quiet_s=0.1))
        assert await collecting == [2]
        lobby.deliver({2: pb.SignedTask(task=b"task-2")})
        assert (await again).task == b"task-2"
        lobby.clear()

    run(scenario())


def test_a_device_not_drawn_is_told_once_then_waits_for_the_next_check_in() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=1, window_s=5, pool_size=2,
                                                       quiet_s=0.1))
        await asyncio.sleep(0)
        waiters = {d: asyncio.create_task(lobby.wait_for_task(d, keys(d), 30)) for d in (1, 2)}
        (chosen,) = await collecting
        other = 3 - chosen
        assert await waiters[other] is None  # told at the draw
        lobby.deliver({chosen: pb.SignedTask(task=b"task")})
        assert (await waiters[chosen]).task == b"task"
        again = asyncio.create_task(lobby.wait_for_task(other, keys(other), 30))
        await asyncio.sleep(0.1)
        assert not again.done()  # not answered while the round runs
        lobby.clear()
        collecting = asyncio.create_task(lobby.collect(capacity=1, window_s=5, quiet_s=0.1))
        assert await collecting == [other]
        lobby.deliver({other: pb.SignedTask(task=b"next")})
        assert (await again).task == b"next"
        lobby.clear()

    run(scenario())


async def _held(lobby: Lobby) -> None:
    while not lobby.is_held:  # (a readiness wait: the window has run out, the hold begun)
        await asyncio.sleep(0.005)


async def _seated_cohort(lobby: Lobby, members: tuple[int, ...], busy_s: float) -> None:
    """A check-in that draws ``members`` and hands them tasks busy for ``busy_s``, cleared
    (the round released or aborted)."""
    collecting = asyncio.create_task(lobby.collect(capacity=len(members), window_s=5))
    waiters = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 30)) for d in members]
    assert await collecting == sorted(members)
    lobby.deliver({d: pb.SignedTask(task=bytes([d])) for d in members}, time.time() + busy_s)
    await asyncio.gather(*waiters)
    lobby.clear()


def test_a_check_in_short_of_devices_is_held_for_the_last_cohorts_members() -> None:
    """A check-in whose window ends below min_size while members of the last cohort have not
    asked again (busy with an aborted round) waits for them, and closes once they are back and
    quiet (before, it closed at its window with the pool it had: the attempt aborted for too
    few devices while they were still on their way)."""
    async def scenario() -> list[int]:
        lobby = Lobby()
        await _seated_cohort(lobby, (1, 2, 3), busy_s=60)
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=0.05, quiet_s=0.2,
                                                       pool_size=3, min_size=2))
        await asyncio.sleep(0)
        first = asyncio.create_task(lobby.wait_for_task(1, keys(11), 30))
        await _held(lobby)
        assert not collecting.done() and lobby.cohort_size == 1
        late = [asyncio.create_task(lobby.wait_for_task(d, keys(10 + d), 30)) for d in (2, 3)]
        cohort = await collecting
        lobby.clear()
        await asyncio.gather(first, *late)
        return cohort

    assert run(scenario()) == [1, 2, 3]


def test_a_held_check_in_closes_once_every_member_is_back_even_short() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        await _seated_cohort(lobby, (1, 2), busy_s=60)
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=0.05, quiet_s=0.1,
                                                       min_size=3))
        await asyncio.sleep(0)
        waiters = [asyncio.create_task(lobby.wait_for_task(1, keys(11), 30))]
        await _held(lobby)
        waiters.append(asyncio.create_task(lobby.wait_for_task(2, keys(12), 30)))
        # All back, still short of 3: nothing more to wait for (run's 10 s, not the bound's 60).
        assert await collecting == [1, 2]
        lobby.clear()
        await asyncio.gather(*waiters)

    run(scenario())


def test_a_check_in_is_not_held_past_the_members_bound_nor_without_a_cohort() -> None:
    async def scenario() -> None:
        lobby = Lobby()
        # No cohort yet: the window is all.
        assert await lobby.collect(capacity=2, window_s=0.05, min_size=2) == []
        lobby.clear()
        # A cohort whose round is over by its bound (a member that never comes back).
        await _seated_cohort(lobby, (1, 2), busy_s=-1)
        assert await lobby.collect(capacity=2, window_s=0.05, min_size=2) == []
        assert not lobby.is_held
        lobby.clear()
        # Enough devices at the window's end: closed as before, members not back or not.
        await _seated_cohort(lobby, (1, 2), busy_s=60)
        collecting = asyncio.create_task(lobby.collect(capacity=3, window_s=0.2, min_size=1))
        await asyncio.sleep(0)
        waiter = asyncio.create_task(lobby.wait_for_task(7, keys(7), 30))
        assert await collecting == [7]
        lobby.clear()
        await waiter

    run(scenario())


class _Told:
    """A listener that records each check-in's life (as the leader's selector hub hears it)."""

    def __init__(self) -> None:
        self.said: list[tuple[str, int]] = []

    def opened(self, checkin: int) -> None:
        self.said.append(("opened", checkin))

    def closed(self, checkin: int) -> None:
        self.said.append(("closed", checkin))

    def delivered(self, checkin: int, tasks: dict[int, pb.SignedTask]) -> None:
        self.said.append(("delivered", checkin))

    def cleared(self, checkin: int) -> None:
        self.said.append(("cleared", checkin))


@pytest.mark.parametrize("held", [False, True])
def test_a_check_in_whose_collect_is_cancelled_is_closed_as_at_its_end(held: bool) -> None:
    """``collect`` cancelled in its window, or while held for the last cohort (the coordinator
    stops, a caller's timeout), then its caller's ``clear``: the check-in is closed, not held,
    its listeners told so, its pool told "none", and a device asking next waits for the next
    check-in and joins it. Before, ``_opened`` stayed set and listeners heard no close: such a
    device was told "none" at once, again and again (test_link_charging's fake devices spun
    without end at teardown)."""
    async def scenario() -> None:
        lobby = Lobby()
        told = _Told()
        if held:
            await _seated_cohort(lobby, (1, 2), busy_s=60)
        lobby.listeners.append(told)
        collecting = asyncio.create_task(lobby.collect(capacity=2, window_s=0.05 if held
                                                       else 60, min_size=2))
        await asyncio.sleep(0)
        pooled = asyncio.create_task(lobby.wait_for_task(1, keys(11), 30))
        if held:
            await _held(lobby)
        while lobby.cohort_size < 1:  # (a readiness wait)
            await asyncio.sleep(0)
        collecting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await collecting
        lobby.clear()
        assert await pooled is None
        assert not lobby.is_open and not lobby.is_held and lobby.cohort_size == 0
        checkin = lobby.checkin
        assert told.said == [("cleared", checkin - 1),  # (collect's own clear, as it opens)
                             ("opened", checkin), ("closed", checkin), ("cleared", checkin)]
        asking = asyncio.create_task(lobby.wait_for_task(3, keys(3), 30))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not asking.done()  # waits for the next check-in...
        assert await lobby.collect(capacity=1, window_s=60) == [3]  # ...and joins it
        lobby.clear()
        assert await asking is None

    run(scenario())


def test_a_cancel_that_comes_as_a_device_joins_ends_collect() -> None:
    """The cancel (a coordinator's stop cancels its runner) in the same step as a join, which
    wakes collect's wait. Before, Python 3.11's wait_for returned the join and lost the cancel
    (gh-86296): collect ran out its window (a day, where --checkin-ms says so), and the stop
    waited for the runner until it cancelled it again."""
    async def scenario() -> None:
        lobby = Lobby()
        collecting = asyncio.create_task(lobby.collect(capacity=2, window_s=60))
        while not lobby.is_open:  # (a readiness wait)
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # (collect in its wait)
        assert lobby.join(1, keys(1)) is not None
        collecting.cancel()
        # (5 s only bounds a failure: the cancel ends collect in the next steps)
        await asyncio.wait({collecting}, timeout=5)
        assert collecting.cancelled()
        assert not lobby.is_open
        lobby.clear()

    run(scenario())


class _CancelAt:
    """A lobby listener that cancels ``task`` when the lobby tells it ``hook``: in the same
    step as the lobby sets the event the task waits on, as a gRPC handler whose call goes
    away then is cancelled."""

    def __init__(self, hook: str) -> None:
        self.hook = hook
        self.task: asyncio.Task[object] | None = None

    def _told(self, hook: str) -> None:
        if hook == self.hook and self.task is not None:
            self.task.cancel()

    def opened(self, checkin: int) -> None:
        self._told("opened")

    def closed(self, checkin: int) -> None:
        self._told("closed")

    def delivered(self, checkin: int, tasks: dict[int, pb.SignedTask]) -> None:
        self._told("delivered")

    def cleared(self, checkin: int) -> None:
        self._told("cleared")


async def _waiting(event: object) -> None:
    # (a readiness wait: a waiter is on the lobby's event)
    while not event._waiters:  # type: ignore[attr-defined]
        await asyncio.sleep(0)


@pytest.mark.parametrize("hook", ["opened", "closed", "delivered", "cleared"])
def test_a_cancel_that_comes_as_its_wait_ends_ends_wait_for_task(hook: str) -> None:
    """A device's GetTask cancelled (its call went away, or a newer call replaced it) in the
    same step as the event it waits on: the check-in opening, closing on a device it refused,
    its task delivered, the round it holds a task of cleared. Before, Python 3.11's wait_for
    returned and lost the cancel (gh-86296, as in Lobby.collect, e64bf6c): a call gone as the
    check-in opened joined the cohort, as a member that would never get its task, and the
    others answered the call that was gone or waited on for the next check-in."""
    async def scenario() -> None:
        lobby = Lobby()
        cancel = _CancelAt(hook)
        lobby.listeners.append(cancel)
        task = pb.SignedTask(task=b"task-1")
        collecting: asyncio.Task[list[int]] | None = None
        if hook != "opened":
            collecting = asyncio.create_task(lobby.collect(
                capacity=1, window_s=60, eligible=lambda device_id: device_id != 2))
            while not lobby.is_open:  # (a readiness wait)
                await asyncio.sleep(0)
        if hook == "opened":
            waiter = asyncio.create_task(lobby.wait_for_task(1, keys(1), 30))
            await _waiting(lobby._opened)
        elif hook == "closed":  # (device 2 is refused, and told when the check-in closes)
            waiter = asyncio.create_task(lobby.wait_for_task(2, keys(2), 30))
            await _waiting(lobby._closed)
        else:
            waiter = asyncio.create_task(lobby.wait_for_task(1, keys(1), 30))
            assert collecting is not None and await collecting == [1]
            if hook == "cleared":
                lobby.deliver({1: task})
                assert await waiter == task
                known = hashlib.sha256(task.task).digest()
                waiter = asyncio.create_task(lobby.wait_for_task(1, keys(1), 30, known))
                await _waiting(lobby._cleared)
        cancel.task = waiter
        if hook == "opened":
            collecting = asyncio.create_task(lobby.collect(capacity=1, window_s=60))
        elif hook == "closed":
            joined = lobby.join(1, keys(1))  # (fills the pool: the check-in closes)
            assert joined is not None
        elif hook == "delivered":
            lobby.deliver({1: task})
        else:
            lobby.clear()
        # (5 s only bounds a failure: the cancel ends the wait in the next steps)
        await asyncio.wait({waiter}, timeout=5)
        assert waiter.cancelled()
        if hook == "opened":
            assert lobby.cohort_size == 0  # (the call that went away did not join)
        assert collecting is not None
        collecting.cancel()
        await asyncio.gather(collecting, return_exceptions=True)
        lobby.clear()

    run(scenario())
