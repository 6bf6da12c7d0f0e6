"""Where devices wait for tasks: round check-in and task delivery.

A round first opens check-in: devices that ask for a task join the round's *pool*. Check-in
closes when its window ends, when the pool holds ``pool_size`` devices, or once it holds at
least ``capacity`` and no device has joined for ``quiet_s``; the cohort is then ``capacity``
devices drawn uniformly at random (OS entropy) from the pool. Drawing from an oversubscribed
pool, rather than taking the first to arrive, keeps a fast group of devices (Sybils scripted to
poll first) from filling a cohort around a victim: they get seats in proportion to their share
of the pool, not to their speed. Devices that are not drawn, or that ``eligible`` refuses (a
device over its lifetime budget), get no task.

The coordinator then opens the round at the aggregator and hands every cohort member its
signed task; a device asking again for the same attempt gets the same task (a retry after a lost
response is harmless), unless it says it already holds that task (``known``, the SHA-256 of the
task bytes): then its request waits until the round is over, so a device that finished (or
dropped out of) a round long-polls instead of asking again and again while the round runs.

A request is answered when the device's task changes, not before: a task, or "none" once (not
drawn, refused by a check-in, which it learns when that check-in closes, or the run is over).
A device that was told "none" asks again and waits there for the next check-in. So a device
makes about two task calls a round however long its stages take, as long as its wait bound
(``wait_s``) outlasts them.

A device checks in with its fresh round public keys (c_pk, s_pk); the lobby keeps the keys of
the call that joined the cohort, and the round's config commits to exactly those.

A check-in whose window ends with fewer than ``min_size`` devices in the pool is held open
while members of the latest cohort that got tasks have not asked again (they may still be busy
with that round: a device process far behind on a loaded host winds down an aborted round's
sessions for up to the round's last deadline plus its overrun), until that bound at most
(``deliver``'s ``busy_until``; after a restart, the stored cohort of the run's latest
attempt: ``expect``); once held, it closes when they are all back, at the bound, or
after ``quiet_s`` without a join once the pool holds ``min_size``. Before, it closed at its
window and the attempt aborted for too few devices while they were still on their way, which
spent one of the run's attempts (docker compose at a load of 23: attempts 2 to 4 after an
abort found no device checked in). Likewise, after the coordinator starts, for the devices that
asked its previous process (``expect_return``): they reconnect within their retry bound.

Selectors (``fedhh_coordinator.selectors``) join their devices through ``join`` and learn of
each check-in's opening, closing, tasks and end through a ``LobbyListener``: the pool is one,
whichever process a device asked, so the draw is uniform over all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from fedhh.errors import ConfigError
from fedhh.rpc.crowd_event import CrowdEvent
from fedhh.v1 import coordinator_pb2 as pb

log = logging.getLogger(__name__)
# How long after the coordinator starts serving the devices of a previous process may still be
# coming back: a device asks an unreachable coordinator again at least every 10 s
# (fedhh_device.fleet.GET_TASK_RETRY), on a channel that reconnects at least every 2 s
# (fedhh_device.main.RECONNECT_MAX_MS), plus a margin for a loaded host. Measured: 200
# devices in two processes, the coordinator down 20 s, were all back 9.9 s after it served.
RETURN_S = 20.0


def _held_for(cohort: bool, returning_longer: bool) -> str:
    """The log line of a check-in held past its window, naming what bounds the hold: the
    latest cohort's members still in their round (``cohort``), the devices of a previous
    process (``returning_longer``: their bound ends later), or both. Before, a hold with a
    cohort read "for the last cohort" alone, even where the hold lasted to the later bound of
    the returning devices, or the cohort's had already passed."""
    if cohort and returning_longer:
        return "check-in held for the last cohort and the devices reconnecting after the start"
    if cohort:
        return "check-in held for the last cohort"
    return "check-in held for the devices reconnecting after the start"


def _monotonic(unix: float) -> float:
    """The instant ``unix`` (Unix time) on the monotonic clock, as the holds keep it: read
    against the wall clock as each check-in opened, a clock stepped back an hour (NTP
    correcting one that ran ahead) held a check-in short of devices an hour longer, and one
    stepped ahead ended the hold at once."""
    return time.monotonic() + unix - time.time()


class LobbyListener(Protocol):
    """Told of each check-in's life (the leader's selector hub)."""

    def opened(self, checkin: int) -> None: ...

    def closed(self, checkin: int) -> None: ...

    def delivered(self, checkin: int, tasks: dict[int, pb.SignedTask]) -> None: ...

    def cleared(self, checkin: int) -> None: ...


class Lobby:
    def __init__(self) -> None:
        self.checkin = 0  # the id of the latest check-in (1, 2, ...; 0: none yet)
        self.listeners: list[LobbyListener] = []
        self._open = False
        self._pool_size = 0
        self._eligible: Callable[[int], bool] = lambda device_id: True
        self._joined = asyncio.Event()
        self._cohort: dict[int, asyncio.Future[pb.SignedTask | None]] = {}
        self._keys: dict[int, tuple[bytes, bytes]] = {}  # round keys presented at check-in
        self._presented: set[bytes] = set()
        self._opened = CrowdEvent()
        self._closed = CrowdEvent()  # set when the open check-in closes
        self._cleared = CrowdEvent()
        # The members of the latest cohort that got tasks and have not joined a check-in since,
        # and until when (time.monotonic()) they may still be busy with that round (``deliver``).
        self._busy: set[int] = set()
        self._busy_until = 0.0
        # Until when (time.monotonic()) devices that asked a previous process may still be
        # coming back (``expect_return``).
        self._returning_until = 0.0
        self._held = False  # the open check-in's window is over, held for them
        self.window_s = 0.0  # the latest check-in's window

    async def collect(self, capacity: int, window_s: float, *, pool_size: int | None = None,
                      quiet_s: float = 1.0, eligible: Callable[[int], bool] | None = None,
                      min_size: int = 0, stop: Callable[[], bool] = lambda: False) -> list[int]:
        """Open check-in (module docstring); the cohort, sorted, when it closes. ``min_size``:
        the fewest devices the round can run with (the window is held for the latest cohort's
        members while the pool holds fewer). ``stop``: close it now (the run was cancelled);
        asked as it opens and whenever ``recheck`` or a join wakes it."""
        self.clear()
        self.window_s = window_s
        self._pool_size = max(capacity, pool_size or capacity)
        self._eligible = eligible or (lambda device_id: True)
        self._open = True
        self._closed = CrowdEvent()
        self.checkin += 1
        self._opened.set()
        for listener in self.listeners:
            listener.opened(self.checkin)
        loop = asyncio.get_running_loop()
        until = loop.time() + window_s
        busy_until = loop.time() + self._busy_until - time.monotonic()
        returning_until = loop.time() + self._returning_until - time.monotonic()
        self._held = False
        try:
            while len(self._cohort) < self._pool_size and not stop():
                now = loop.time()
                remaining, enough = until - now, len(self._cohort) >= capacity
                if remaining <= 0:
                    # The window is over: held while the latest cohort's members, or the devices
                    # of a previous process, may still come.
                    cohort_until = busy_until if self._busy else now
                    bound = max(cohort_until, returning_until)
                    if not (now < bound and (self._held or len(self._cohort) < min_size)):
                        break
                    if not self._held:
                        self._held = True
                        log.info(_held_for(cohort_until > now, returning_until > cohort_until),
                                 extra={"checkin": self.checkin, "pool": len(self._cohort),
                                        "min_devices": min_size,
                                        "members_not_back": len(self._busy),
                                        "until_s": round(bound - now, 1)})
                    remaining, enough = bound - now, len(self._cohort) >= min_size
                joined = self._joined = asyncio.Event()
                try:
                    # (asyncio.timeout, not wait_for: Python 3.11's wait_for lost a cancel
                    # that came as a join woke it, gh-86296, and collect ran out its window)
                    async with asyncio.timeout(min(remaining, quiet_s) if enough
                                               else remaining):
                        await joined.wait()
                except TimeoutError:
                    if enough:
                        break  # a quiet spell with enough devices in the pool
        finally:
            # Also where collect is cancelled (the coordinator stops, a caller's timeout):
            # before, the check-in stayed open and ``_opened`` set past the caller's
            # ``clear``, so a device waiting for the next check-in was told "none" at once,
            # again and again.
            self._open = self._held = False
            self._closed.set()
            self._opened = CrowdEvent()
            for listener in self.listeners:
                listener.closed(self.checkin)
        pool = sorted(self._cohort)
        chosen = set(secrets.SystemRandom().sample(pool, capacity)) if len(pool) > capacity \
            else set(pool)
        for device_id in pool:
            if device_id not in chosen:
                future = self._cohort.pop(device_id)
                if not future.done():
                    future.set_result(None)
                self._keys.pop(device_id, None)
        return sorted(chosen)

    def deliver(self, tasks: dict[int, pb.SignedTask], busy_until: float = 0.0) -> None:
        """Hand each cohort member its task (members without one get nothing). Those with one
        may be busy with its round until ``busy_until`` (Unix time, the round's last deadline):
        a check-in short of devices is held for them until they join one (module docstring),
        the span held on the monotonic clock from here (``_monotonic``)."""
        self._busy, self._busy_until = set(tasks), _monotonic(busy_until)
        for device_id, future in self._cohort.items():
            if not future.done():
                future.set_result(tasks.get(device_id))
        for listener in self.listeners:
            listener.delivered(self.checkin, tasks)

    def expect(self, members: Iterable[int], busy_until: float) -> bool:
        """Hold a check-in short of devices for ``members`` until ``busy_until`` (Unix time),
        as ``deliver`` does for the cohort it hands tasks to: the cohort a previous process of
        the coordinator drew, read back from the store on a restart (before, a restarted
        coordinator knew no cohort, and its first check-in closed at its window while that
        cohort's members were still winding down the round it had stopped in). Nothing, and
        False, if this lobby already waits for a cohort at least as long."""
        until = _monotonic(busy_until)
        if self._busy and self._busy_until >= until:
            return False
        self._busy, self._busy_until = set(members), until
        return True

    def expect_return(self, until: float) -> None:
        """Hold a check-in short of devices until ``until`` (Unix time) for the devices that
        asked a previous process of the coordinator: after a restart they come back within
        their retry bound (``RETURN_S``), not at once. Before, the first check-in closed at its
        window: 218 of 450 devices were back in its 10 s, and the attempt aborted for too few
        (one of the round's attempts spent). The span is held on the monotonic clock from
        here (``_monotonic``)."""
        self._returning_until = max(self._returning_until, _monotonic(until))

    def recheck(self) -> None:
        """Wake the open check-in to ask its ``stop`` again."""
        self._joined.set()

    def clear(self) -> None:
        """Forget the cohort (the round is over or aborted); waiting devices get no task."""
        for future in self._cohort.values():
            if not future.done():
                future.set_result(None)
        self._cohort = {}
        self._keys = {}
        self._presented = set()
        self._open = False
        self._closed.set()
        self._cleared.set()
        self._cleared = CrowdEvent()
        for listener in self.listeners:
            listener.cleared(self.checkin)

    def round_keys(self, device_id: int) -> tuple[bytes, bytes]:
        """(c_pk, s_pk) that cohort member ``device_id`` presented when it joined."""
        return self._keys[device_id]

    async def wait_for_task(self, device_id: int, round_keys: tuple[bytes, bytes], wait_s: float,
                            known: bytes = b"") -> pb.SignedTask | None:
        """The device's task for the current round, joining check-in (with ``round_keys``) if it
        is open.

        ``known``: the SHA-256 of the task bytes the device already holds. If that is still its
        task, wait (within ``wait_s``) until the round is over, then go on as for a new request.
        """
        seat = self._cohort.get(device_id)
        left = await wait_out_held_task(seat, known, self._cleared, wait_s,
                                        lambda: self._cohort.get(device_id) is seat)
        if left is None:
            return None
        loop = asyncio.get_running_loop()
        wait_s, until = left, loop.time() + left
        future = self._cohort.get(device_id)
        # (asyncio.timeout around the waits, not wait_for: Python 3.11's wait_for returns what
        # it waited for and loses a cancel that comes in the same step, gh-86296, so a call
        # that went away as the check-in opened still joined the cohort, as a member that
        # would never get its task)
        if future is None:
            if not self._open:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._opened.wait()
            future = self.join(device_id, round_keys)
            if future is None:
                if self._open:
                    # Refused by this check-in (full, or the device is not eligible): told once,
                    # when it closes, instead of asking again and again while it stays open.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout_at(until):
                            await self._closed.wait()
                return None
        try:
            # (within the call's bound as a whole, as a selector's wait: before, a whole
            # ``wait_s`` again once the device had waited for the opening and joined)
            async with asyncio.timeout_at(until):
                return await asyncio.shield(future)
        except TimeoutError:
            return None

    def join(self, device_id: int, round_keys: tuple[bytes, bytes]
             ) -> asyncio.Future[pb.SignedTask | None] | None:
        """Put ``device_id`` in the open check-in's pool with ``round_keys``: the future of its
        task (the one it has if it is in already), or None if no check-in is open, the pool is
        full or the device is not eligible."""
        future = self._cohort.get(device_id)
        if future is not None:
            return future
        if self._open:
            self._busy.discard(device_id)  # (back, whether the pool takes it or not)
        if not self._open or len(self._cohort) >= self._pool_size \
                or not self._eligible(device_id):
            return None
        if any(key in self._presented for key in round_keys):
            # A cohort's keys must be distinct. The device service (and the leader, for its
            # selectors) already refuses keys another device presented first
            # (fedhh_coordinator.keys), so this guards the lobby's own callers.
            raise ConfigError("these round keys were already presented in this check-in")
        future = asyncio.get_running_loop().create_future()
        self._cohort[device_id] = future
        self._keys[device_id] = round_keys
        self._presented.update(round_keys)
        self._joined.set()
        return future

    def leave(self, device_id: int) -> None:
        """Take ``device_id`` out of the open check-in's pool (its selector is gone); nothing
        once the check-in has closed (a drawn member keeps its seat, as a dropout would)."""
        if not self._open or device_id not in self._cohort:
            return
        future = self._cohort.pop(device_id)
        if not future.done():
            future.set_result(None)
        for key in self._keys.pop(device_id, ()):
            self._presented.discard(key)

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def is_held(self) -> bool:
        """The open check-in's window is over and it is held for the latest cohort's members
        (module docstring)."""
        return self._held

    @property
    def cohort_size(self) -> int:
        return len(self._cohort)


async def wait_out_held_task(seat: asyncio.Future[pb.SignedTask | None] | None, known: bytes,
                             round_over: CrowdEvent, wait_s: float,
                             still_seated: Callable[[], bool]) -> float | None:
    """A device that says it holds its task (``known``: the SHA-256 of its bytes) waits until
    the round is over. If ``seat`` holds that task, wait (within ``wait_s``) for ``round_over``;
    None when the device is to be answered "none" now (the wait ran out, or ``still_seated()``:
    the round ended without a new seat for it), else the wait left, to go on as for a new
    request."""
    loop = asyncio.get_running_loop()
    until = loop.time() + wait_s
    if known and seat is not None and seat.done():
        task = seat.result()
        if task is not None and hashlib.sha256(task.task).digest() == known:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):  # (not wait_for: Lobby.wait_for_task)
                    await round_over.wait()
            wait_s = until - loop.time()
            if wait_s <= 0 or still_seated():
                return None
    return wait_s
