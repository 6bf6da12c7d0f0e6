"""The charge before a released sum's read (``Runner.write_charge``) is retried while the store
is unavailable for a patience that ends well within the slack its GetResult call has left past
the sum's header (``CALL_TIMEOUT_S``), derived from it.

Before, the patience (30 s) equalled the slack: tries reaching the end of the patience, plus a
slow last write, passed the call's deadline once the charge was written, so the sum was lost
unread and the round ran again (a second charge, the bug of 6734439, in a narrow window)."""

from __future__ import annotations

import asyncio

from fedhh.rpc.control_client import CALL_TIMEOUT_S
from fedhh_coordinator.control import GrpcAggregator
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.db.postgres import LOCK_WAIT_MS
from fedhh_coordinator.runner import CHARGE_PATIENCE_S, Runner

PG_CONNECT_TIMEOUT_S = 10  # (db.postgres: psycopg.connect(..., connect_timeout=10))


def test_the_patience_leaves_the_last_try_and_the_read_room_within_the_calls_slack() -> None:
    room = CALL_TIMEOUT_S - CHARGE_PATIENCE_S  # what the last try and the sum's read have
    assert room >= PG_CONNECT_TIMEOUT_S + LOCK_WAIT_MS / 1000 + 1, room

    async def clients() -> list[float]:  # (the coordinator's calls keep that slack)
        aggregator = GrpcAggregator("127.0.0.1:9", None, b"c" * 32)
        try:
            return [aggregator.single.client._call_timeout,
                    aggregator.combiner.client._call_timeout]
        finally:
            await aggregator.close()

    assert asyncio.run(clients()) == [CALL_TIMEOUT_S, CALL_TIMEOUT_S]


class SkippingLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock can be moved on: a pause of ``skip`` seconds held in a
    synchronous call, without the wait."""

    skipped = 0.0

    def time(self) -> float:
        return super().time() + self.skipped

    def skip(self, seconds: float) -> None:
        self.skipped += seconds


def test_no_try_starts_past_the_patience_when_a_pause_overran_it() -> None:
    """The bound the derivation rests on. Another task holds the event loop (a synchronous
    call) through the pause after the first try, past the patience: the tries end there with
    the store's error (before, one more was made after the patience, at 0.5 s of 0.3)."""
    runner = Runner.__new__(Runner)  # (write_charge reads the two settings alone)
    runner.charge_patience_s, runner.charge_retry_s = 0.3, 0.02
    started: list[float] = []

    def unavailable() -> None:
        started.append(asyncio.get_running_loop().time())
        raise StoreUnavailable("the database is unavailable")

    async def holds_the_loop() -> None:
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        assert isinstance(loop, SkippingLoop)
        loop.skip(0.5)  # (the loop held 0.5 s, as a slow store call holds it)

    async def go() -> tuple[float, BaseException | None]:
        begun = asyncio.get_running_loop().time()
        holder = asyncio.create_task(holds_the_loop())
        try:
            await runner.write_charge(unavailable)
        except StoreUnavailable as error:
            return begun, error
        finally:
            await holder
        return begun, None

    with asyncio.Runner(loop_factory=SkippingLoop) as loop_runner:
        begun, error = loop_runner.run(go())
    assert isinstance(error, StoreUnavailable)
    assert started and all(at - begun <= runner.charge_patience_s for at in started), \
        [at - begun for at in started]
