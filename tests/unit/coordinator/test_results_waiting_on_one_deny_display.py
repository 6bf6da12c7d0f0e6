"""GetResults of one run that come while its deny list is being displayed wait for that one
display (``ShownDenyLists.show``) on the event loop, holding none of the slow reads' threads
(``slow_reads.THREADS``).

Before, each waited for the display in a thread of its own: ``THREADS`` GetResults of a run
with a 300,000-item list (~60 s of display) held every one of them, and the other calls'
reads and the dashboard's pages waited a minute behind them. Here the display hangs until
released, and a GetRun of another run must be answered meanwhile."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import grpc
import pytest
from admin_service_kit import METADATA, admin_stub

from fedhh.codec import Codec
from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import slow_reads
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

ITEMS = ("spam", "eggs", "ham")
# A free slow reads' thread answers GetRun at once; this only bounds the wait for one held
# behind the display's waiters (the old code's failure), and for the display to start
ANSWER_S = 30.0


def test_results_waiting_on_one_deny_display_leave_the_slow_read_threads_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    for run_id, deny in (("big", ITEMS), ("small", ("x",))):
        asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                                min_devices=300, deny_list=deny), run_id))
    started, release = threading.Event(), threading.Event()
    displayed: list[int] = []
    display = Codec.display_item

    def held(self: Codec, code: int) -> str:  # (a 300,000-item list's display, until released)
        displayed.append(code)
        started.set()
        release.wait()
        return str(display(self, code))

    monkeypatch.setattr(Codec, "display_item", held)

    async def scenario() -> tuple[bool, list[list[str]]]:
        async with admin_stub(store) as stub:
            results = [asyncio.ensure_future(stub.GetResults(
                pb.GetResultsRequest(run_id="big"), metadata=METADATA, timeout=4 * ANSWER_S))
                for _ in range(slow_reads.THREADS)]
            try:
                assert await asyncio.to_thread(started.wait, ANSWER_S)
                try:
                    run = await stub.GetRun(pb.GetRunRequest(run_id="small"),
                                            metadata=METADATA, timeout=ANSWER_S)
                    answered = run.run_id == "small"
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                    answered = False
            finally:
                release.set()
            return answered, [list((await r).deny_list) for r in results]

    try:
        answered, lists = asyncio.run(scenario())
    finally:
        release.set()
        store.close()
    assert answered
    assert [sorted(shown) for shown in lists] == [sorted(ITEMS)] * slow_reads.THREADS
    assert len(displayed) == len(ITEMS)  # (one display between them)
