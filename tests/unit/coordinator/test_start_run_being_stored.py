"""A run StartRun is still storing, met by a second StartRun of its id or by a CancelRun.

A caller whose StartRun passed its deadline (a long solve, a long deny list) asks again or
cancels. Before, a second StartRun of the id did the whole work again beside the first (each
retry one more), and a CancelRun was NOT_FOUND while the run, stored after it, ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from admin_service_kit import ADMIN_TOKEN, METADATA

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.service import AdminService
from fedhh_coordinator.store import Store

CONFIG = pb.RunConfig(eps_agg=4.0, target_devices=400, min_devices=300)


class Runner:
    def __init__(self) -> None:
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1

    def cancel(self, run_id: str, by: str) -> None:
        raise AssertionError("a pending run is cancelled in the store, not by the runner")

    def progress_of(self, run_id: str) -> None:
        return None


class Refused(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code, self.details = code, details


class Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return METADATA

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Refused(code, details)


class HeldWrites:
    """Store.create_run held until ``release`` is set; ``entered`` counts the writes begun."""

    def __init__(self) -> None:
        self.entered = 0
        self.first = threading.Event()
        self.release = threading.Event()
        self.fail: Exception | None = None


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldWrites]:
    writes = HeldWrites()
    write = Store.create_run

    def held_write(self: Store, *args: Any) -> None:
        writes.entered += 1
        writes.first.set()
        writes.release.wait(60)
        if writes.fail is not None:
            raise writes.fail
        write(self, *args)

    monkeypatch.setattr(Store, "create_run", held_write)
    yield writes
    writes.release.set()


def service(tmp_path: Path) -> tuple[AdminService, Store]:
    store = Store(tmp_path / "c.sqlite")
    return AdminService(store, Runner(), ADMIN_TOKEN,  # type: ignore[arg-type]
                        LifetimeBudget(eps=1e9, delta=0.5)), store


async def storing(admin: AdminService, held: HeldWrites, run_id: str = "p"
                  ) -> asyncio.Future[pb.Run]:
    call = asyncio.ensure_future(admin.StartRun(
        pb.StartRunRequest(run_id=run_id, config=CONFIG), Context()))  # type: ignore[arg-type]
    assert await asyncio.to_thread(held.first.wait, 60)
    return call


async def cancel_given_up(admin: AdminService, run_id: str = "p") -> None:
    """A CancelRun whose caller goes away (its deadline) once the call has begun."""
    cancel = asyncio.ensure_future(admin.CancelRun(
        pb.CancelRunRequest(run_id=run_id), Context()))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    cancel.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await cancel


async def start(admin: AdminService, config: pb.RunConfig = CONFIG) -> Refused | pb.Run:
    """StartRun of run "p" asking for ``config``: the run, or the call's refusal."""
    try:
        return await asyncio.wait_for(admin.StartRun(
            pb.StartRunRequest(run_id="p", config=config),
            Context()), 60)  # type: ignore[arg-type]
    except Refused as refused:
        return refused


def test_a_repeat_of_a_start_run_being_stored_is_answered_the_run_stored_once(
        tmp_path: Path, held: HeldWrites) -> None:
    # (before: refused ALREADY_EXISTS "being stored", which a caller retrying a call whose
    # deadline passed could not tell from another's run)
    admin, store = service(tmp_path)

    async def go() -> tuple[Refused | pb.Run, Refused | pb.Run, pb.Run]:
        first = await storing(admin, held)
        other = await start(admin, pb.RunConfig(eps_agg=3.0, target_devices=400,
                                                min_devices=300))
        again = asyncio.ensure_future(start(admin))
        try:
            await asyncio.sleep(0)  # (the repeat waits for the storing under way)
            assert not again.done()
        finally:
            held.release.set()
        return other, await again, await first

    try:
        other, again, run = asyncio.run(go())
    finally:
        store.close()
    assert isinstance(again, pb.Run), again
    assert again.run_id == "p" and again.state == "pending" and again.config == run.config
    assert held.entered == 1  # the run's work was done once
    assert run.run_id == "p" and run.state == "pending"
    assert isinstance(other, Refused), other
    assert other.code == grpc.StatusCode.ALREADY_EXISTS
    assert "run 'p' is already being stored by an earlier StartRun, with another config " \
           "(eps_agg differ)" in other.details, other.details


def test_a_run_cancelled_while_being_stored_is_cancelled_once_stored(
        tmp_path: Path, held: HeldWrites) -> None:
    admin, store = service(tmp_path)

    async def go() -> pb.Run:
        first = await storing(admin, held)
        cancel = asyncio.ensure_future(admin.CancelRun(
            pb.CancelRunRequest(run_id="p"), Context()))  # type: ignore[arg-type]
        await asyncio.sleep(0)  # (the cancel asked before the write ends)
        held.release.set()
        await first
        return await cancel

    try:
        answered = asyncio.run(go())
        assert store.run("p").state == "cancelled"
    finally:
        store.close()
    assert answered.state == "cancelled"


def test_a_cancel_given_up_while_its_run_is_stored_still_cancels_the_run(
        tmp_path: Path, held: HeldWrites) -> None:
    admin, store = service(tmp_path)

    async def go() -> str:
        first = await storing(admin, held)
        await cancel_given_up(admin)
        held.release.set()
        await first
        # (the cancel applies in a task of its own, once the write ended)
        for _ in range(6000):
            if store.run_state("p") != "pending":
                break
            await asyncio.sleep(0.01)
        return store.run_state("p")

    try:
        state = asyncio.run(go())
    finally:
        store.close()
    assert state == "cancelled"


def test_a_cancel_of_a_run_whose_storing_failed_is_not_found(
        tmp_path: Path, held: HeldWrites) -> None:
    admin, store = service(tmp_path)
    held.fail = StoreUnavailable("the disk went away")

    async def go() -> list[Any]:
        first = await storing(admin, held)
        cancel = asyncio.ensure_future(admin.CancelRun(
            pb.CancelRunRequest(run_id="p"), Context()))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        held.release.set()
        return await asyncio.gather(first, cancel, return_exceptions=True)

    try:
        started, cancelled = asyncio.run(go())
        assert store.run_states() == []
    finally:
        store.close()
    assert isinstance(started, Refused) and started.code == grpc.StatusCode.UNAVAILABLE
    assert isinstance(cancelled, Refused), cancelled
    assert cancelled.code == grpc.StatusCode.NOT_FOUND and "unknown run" in cancelled.details


@pytest.mark.parametrize("call", ["GetRun", "GetResults"])
def test_a_get_run_of_a_run_being_stored_says_so(tmp_path: Path, held: HeldWrites,
                                                  call: str) -> None:
    # (GetResults: before, "unknown run" where GetRun said "not stored yet")
    admin, store = service(tmp_path)
    request = (pb.GetRunRequest if call == "GetRun" else pb.GetResultsRequest)(run_id="p")

    async def go() -> tuple[Any, pb.Run]:
        first = await storing(admin, held)
        try:
            asked: Any = await getattr(admin, call)(request, Context())
        except Refused as refused:
            asked = refused
        finally:
            held.release.set()
        await first
        return asked, await admin.GetRun(pb.GetRunRequest(run_id="p"),
                                         Context())  # type: ignore[arg-type]

    try:
        asked, stored = asyncio.run(go())
    finally:
        store.close()
    assert isinstance(asked, Refused) and asked.code == grpc.StatusCode.NOT_FOUND, asked
    assert "not stored yet: a StartRun of it is storing it" in asked.details
    assert stored.state == "pending"


@pytest.mark.parametrize("completions", [3, 8])
def test_a_repeat_of_a_start_run_stored_is_answered_the_run_without_planning_it_again(
        tmp_path: Path, held: HeldWrites, completions: int) -> None:
    # (before: planned again, seconds for a long run, then refused ALREADY_EXISTS)
    # 300 devices at eps_agg 4 budget 7 completion rounds: 8 asked for store 7, and the
    # request of 8 again is the same run
    admin, store = service(tmp_path)
    held.release.set()
    config = pb.RunConfig(eps_agg=4.0, target_devices=400, min_devices=300,
                          completion_rounds=completions)

    async def go() -> tuple[pb.Run | Refused, ...]:
        return (await start(admin, config), await start(admin, config),
                await start(admin, pb.RunConfig(eps_agg=4.0, target_devices=401,
                                                min_devices=290,
                                                completion_rounds=completions)))

    try:
        run, again, other = asyncio.run(go())
    finally:
        store.close()
    assert isinstance(run, pb.Run) and run.config.completion_rounds == min(completions, 7), run
    assert again == run
    assert held.entered == 1
    assert isinstance(other, Refused) and other.code == grpc.StatusCode.ALREADY_EXISTS
    assert "run 'p' is already stored, with another config (target_devices, min_devices " \
           "differ)" in other.details, other.details


def test_a_cancel_given_up_of_a_run_whose_storing_failed_logs_no_unretrieved_error(
        tmp_path: Path, held: HeldWrites, caplog: pytest.LogCaptureFixture) -> None:
    # (before: asyncio's "Task exception was never retrieved", a traceback of the NOT_FOUND
    # nobody was left to be told)
    admin, store = service(tmp_path)
    held.fail = StoreUnavailable("the disk went away")

    async def go() -> None:
        first = await storing(admin, held)
        await cancel_given_up(admin)
        held.release.set()
        with contextlib.suppress(Refused):
            await first
        # (the cancel's own task ends once the storing's end reaches it)
        for _ in range(6000):
            if asyncio.all_tasks() == {asyncio.current_task()}:
                break
            await asyncio.sleep(0.01)
        assert asyncio.all_tasks() == {asyncio.current_task()}

    try:
        asyncio.run(go())
        gc.collect()
    finally:
        store.close()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


@pytest.mark.parametrize("run_id", ["r1\n", "r\x00", "a b", "x" * 65])
def test_a_malformed_run_id_is_refused_before_the_store_is_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_id: str) -> None:
    # (before: a repeat's look-up read the store for it first, where a PostgreSQL store
    # refuses a NUL in text, INTERNAL instead of the id's rule)
    admin, _ = service(tmp_path)

    def asked(*args: Any) -> None:
        raise AssertionError("the store was asked about a malformed run id")

    monkeypatch.setattr(Store, "run_config", asked)
    with pytest.raises(Refused) as refused:
        asyncio.run(asyncio.wait_for(admin.StartRun(
            pb.StartRunRequest(run_id=run_id, config=CONFIG),
            Context()), 60))  # type: ignore[arg-type]
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details.startswith("run_id must be 1 to 64 characters"), \
        refused.value.details
