"""GetRun's long-poll: a call that sends the version of the run it saw (``seen``) and a
``wait_ms`` is answered once the run changes (its progress's phase or stage, its state), or when
``wait_ms`` passes; a call without them (an older client's) at once. ``AdminClient.wait`` holds
its calls so, and still follows a coordinator that answers at once (an older one). Before, the
client asked for the run twice a second whatever happened (``fedhh admin wait``, ``fedhh up``,
the load test): two TLS calls a second at the coordinator while a round waited."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from admin_service_kit import ADMIN_TOKEN, METADATA
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh.rpc import admin_client, serving
from fedhh.rpc.admin_client import AdminClient
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.service import AdminService
from fedhh_coordinator.store import Store

CONFIG = RunConfig(eps_agg=4.0, delta=1e-6, rounds=4, target_devices=400, min_devices=300)
# (a guard only: each held call below is answered by a change, long before it)
HELD_MS = 600_000


def _runner(store: Store) -> Runner:
    """A coordinator's runner; the run under test never reaches its aggregator."""
    return Runner(store, None, Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                  DeviceAddresses("aggregator:7100", "https://aggregator:7180"), Lobby(),
                  LifetimeBudget(eps=1e9, delta=0.5))


class _Recorded(AdminService):
    """The service, each GetRun's request recorded and told on ``calls`` as it comes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[pb.GetRunRequest] = []
        self.calls = asyncio.Queue[None]()

    async def GetRun(self, request: pb.GetRunRequest, context: Any) -> pb.Run:
        self.asked.append(request)
        self.calls.put_nowait(None)
        return await super().GetRun(request, context)


@asynccontextmanager
async def _served(store: Store, runner: Runner) -> AsyncIterator[tuple[_Recorded, int]]:
    admin = _Recorded(store, runner, ADMIN_TOKEN, LifetimeBudget(), changes=runner.changes)
    server = serving.new_server()
    pb_grpc.add_AdminServiceServicer_to_server(admin, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield admin, port
    finally:
        await server.stop(None)


@asynccontextmanager
async def _stub(store: Store, runner: Runner, run_id: str) -> AsyncIterator[Any]:
    """A stub of the service over ``store``, with the run ``run_id`` stored (pending)."""
    await create_run(store, CONFIG, run_id)
    async with _served(store, runner) as (_, port), grpc.aio.insecure_channel(
            f"127.0.0.1:{port}") as channel:
        yield pb_grpc.AdminServiceStub(channel)


def _driven(store: Store, runner: Runner, run_id: str) -> None:
    """The progress the runner's driver keeps for ``run_id`` (a round's attempts move it)."""
    runner.driver(RunParts.load(store.run(run_id)))


def test_a_held_get_run_is_answered_when_the_run_moves_on(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    runner = _runner(store)

    async def go() -> list[pb.Run]:
        async with _stub(store, runner, "r") as stub:
            _driven(store, runner, "r")

            async def get(seen: str, wait_ms: int = HELD_MS) -> pb.Run:
                return await stub.GetRun(pb.GetRunRequest(run_id="r", seen=seen,
                                                          wait_ms=wait_ms),
                                         metadata=METADATA, timeout=HELD_MS / 1000 + 30)

            first = await stub.GetRun(pb.GetRunRequest(run_id="r"), metadata=METADATA,
                                      timeout=30)  # (an older client's: answered at once)
            held = asyncio.ensure_future(get(first.version))
            store.open_round("r", 1)  # (the driver opens an attempt, and enters it)
            runner.progress["r"].enter(1, 1, "check-in")
            entered = await held
            held = asyncio.ensure_future(get(entered.version))
            runner.progress["r"].observe_stage("ADVERTISE_KEYS", {})
            staged = await held
            held = asyncio.ensure_future(get(staged.version))
            runner.cancel("r", "the test")
            asked = await held
            # (a run that does not change is answered when wait_ms passes, as it stands)
            started = time.monotonic()
            same = await get(asked.version, wait_ms=50)
            assert time.monotonic() - started >= 0.05
            assert same.version == asked.version
            return [first, entered, staged, asked]

    first, entered, staged, asked = asyncio.run(go())
    assert first.version and first.progress.phase == ""
    assert (entered.state, entered.progress.phase, entered.progress.stage) == (
        "running", "check-in", "")
    assert staged.progress.stage == "ADVERTISE_KEYS"
    assert asked.error.startswith("cancelled by the operator")
    assert len({first.version, entered.version, staged.version, asked.version}) == 4


def test_a_held_get_run_is_answered_at_once_for_another_processs_version(
        tmp_path: Path) -> None:
    """A version another coordinator process handed out (before a restart) is never this
    one's: the follower is answered at once, and follows on from the answer's."""
    store = Store(tmp_path / "c.sqlite")
    runner = _runner(store)

    async def go() -> pb.Run:
        async with _stub(store, runner, "r") as stub:
            return await stub.GetRun(pb.GetRunRequest(run_id="r", seen="0123abcd.7",
                                                      wait_ms=HELD_MS),
                                     metadata=METADATA, timeout=30)

    answer = asyncio.run(go())
    assert answer.state == "pending" and answer.version != "0123abcd.7"


def test_a_pending_run_cancelled_answers_its_held_get_run(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    runner = _runner(store)

    async def go() -> pb.Run:
        async with _stub(store, runner, "p") as stub:
            first = await stub.GetRun(pb.GetRunRequest(run_id="p"), metadata=METADATA,
                                      timeout=30)
            held = asyncio.ensure_future(stub.GetRun(
                pb.GetRunRequest(run_id="p", seen=first.version, wait_ms=HELD_MS),
                metadata=METADATA, timeout=HELD_MS / 1000 + 30))
            await stub.CancelRun(pb.CancelRunRequest(run_id="p"), metadata=METADATA,
                                 timeout=30)
            return await held

    assert asyncio.run(go()).state == "cancelled"


def test_admin_wait_holds_its_calls_until_the_run_changes(tmp_path: Path) -> None:
    """Each call of ``wait`` after the first sends the version it saw, and is answered at the
    run's next change: its calls are one per change, and ``on_change`` sees each."""
    store = Store(tmp_path / "c.sqlite")
    runner = _runner(store)
    seen: list[tuple[str, str]] = []

    async def go() -> tuple[pb.Run, list[pb.GetRunRequest]]:
        await create_run(store, CONFIG, "r")
        _driven(store, runner, "r")
        async with _served(store, runner) as (admin, port):
            loop = asyncio.get_running_loop()
            calls = admin.calls
            with AdminClient(f"127.0.0.1:{port}", ADMIN_TOKEN) as client:
                waiting = loop.run_in_executor(None, lambda: client.wait(
                    "r", 120, on_change=lambda run: seen.append(
                        (run.state, run.progress.phase))))
                await calls.get()
                await calls.get()  # (the second call: held, since nothing changed)
                runner.progress["r"].enter(1, 1, "check-in")
                await calls.get()
                store.set_run_state("r", "done")
                runner.changes.changed("r")  # (as the runner does as a run ends)
                return await waiting, admin.asked

    run, asked = asyncio.run(go())
    assert run.state == "done"
    assert seen == [("pending", ""), ("pending", "check-in"), ("done", "check-in")]
    assert len(asked) == 3 and not asked[0].seen
    assert all(a.seen and a.wait_ms > 0 for a in asked[1:])


class _AnsweredAtOnce(pb_grpc.AdminServiceServicer):
    """A coordinator from before the long-poll: no version, every GetRun answered at once."""

    def __init__(self) -> None:
        self.states = ["pending", "running", "running", "done"]
        self.lock = threading.Lock()

    def GetRun(self, request: pb.GetRunRequest, context: Any) -> pb.Run:
        with self.lock:
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return pb.Run(run_id=request.run_id, state=state)


def test_admin_wait_follows_a_coordinator_that_answers_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_client, "POLL_S", 0.01)
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_AdminServiceServicer_to_server(_AnsweredAtOnce(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with AdminClient(f"127.0.0.1:{port}", ADMIN_TOKEN) as client:
            states: list[str] = []
            run = client.wait("old", 120, on_change=lambda r: states.append(r.state))
    finally:
        server.stop(None)
    assert run.state == "done" and states == ["pending", "running", "done"]
