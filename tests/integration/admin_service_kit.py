"""The coordinator's own AdminService served over a test's store on a port from the OS, and a
stub of it, for the tests that call the admin API through gRPC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest

from fedhh.config import RunConfig
from fedhh.rpc import serving
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.runs import ShownDenyLists, create_run
from fedhh_coordinator.service import AdminService
from fedhh_coordinator.store import Store

ADMIN_TOKEN = b"admin-token-of-the-test"
METADATA = (("authorization", f"Bearer {ADMIN_TOKEN.decode()}"),)


class Idle:
    """A runner with nothing in progress (all the read-only calls ask of it)."""

    def progress_of(self, run_id: str) -> pb.Progress | None:
        return None


@asynccontextmanager
async def admin_stub(store: Store, runner: Any = None,
                     deny: ShownDenyLists | None = None) -> AsyncIterator[Any]:
    """An ``AdminServiceStub`` on a plaintext loopback channel to the service over ``store``
    and ``runner`` (default: ``Idle``; its calls take ``metadata=METADATA``), ``deny`` its
    deny lists displayed; the server stops on leaving."""
    admin = AdminService(store, runner or Idle(), ADMIN_TOKEN, LifetimeBudget(), deny)
    server = serving.new_server()
    pb_grpc.add_AdminServiceServicer_to_server(admin, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                             options=serving.OPTIONS) as channel:
            yield pb_grpc.AdminServiceStub(channel)
    finally:
        await server.stop(None)


def change_as_runs_do(store: Store, call: int, aborted: str, cancelled: str) -> None:
    """Before poll ``call`` of a test's, its rows changed as runs' do: at call 1 an attempt of
    ``aborted`` aborted, at 3 a cancel of ``cancelled`` asked, at 5 that run cancelled."""
    if call == 1:
        store.abort_round(aborted, 1, store.open_round(aborted, 1), "too few devices")
    elif call == 3:
        store.ask_cancel(cancelled, "cancel asked")
    elif call == 5:
        store.set_run_state(cancelled, "cancelled", "cancelled by the operator")


DENIED = tuple(f"denied-item-{k:05d}" for k in range(3000))


def denying_run(store: Store, run_id: str, **knobs: Any) -> None:
    """Store a run of ``run_id`` whose deny list is ``DENIED``, ``knobs`` its other settings."""
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300, deny_list=DENIED, **knobs), run_id))


Query = Callable[..., list[tuple[Any, ...]]]


def recorded_queries(store: Store, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Query]:
    """The SQL of each query of ``store`` from now on, and its query as it was (what a test
    puts back, ``monkeypatch.context``, for what it reads itself)."""
    sqls: list[str] = []
    query = store.db.query

    def recorded(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        sqls.append(sql)
        return query(sql, params)

    monkeypatch.setattr(store.db, "query", recorded)
    return sqls, query
