"""A coordinator that stops waits, bounded, for its cancelled runner to end before it closes
the aggregator's channel and the store: the way out of a cancelled round asks the aggregation
service what became of the round and writes its summary to the store. A runner whose way out
hangs (a service that does not answer) is cancelled again once the wait runs out.

Before, the runner was cancelled and not waited for: the store closed first, and the round's
way out ran in the loop's own shutdown against a closed store (or never ran)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from in_process_coordinator_kit import in_process

from fedhh.rpc import serving
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.store import ACTIVE, Store


@pytest.mark.parametrize("way_out", ["prompt", "hangs"])
def test_a_stop_waits_for_the_runner_before_it_closes_the_store(
        way_out: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    running = asyncio.Event()
    close_store = Store.close

    async def serve(runner: Runner) -> None:
        running.set()
        try:
            await asyncio.Event().wait()  # (a round under way)
        except asyncio.CancelledError:
            try:
                if way_out == "prompt":
                    await asyncio.sleep(0.05)  # (the service answers)
                else:
                    await asyncio.Event().wait()  # (it does not: cut short by a second cancel)
            finally:
                runner.store.run_states(ACTIVE)  # (the store still open)
                events.append("runner ended")
            raise

    async def signalled(server: object) -> None:
        await running.wait()  # (a SIGTERM once the runner runs)

    def store_closed(store: Store) -> None:
        events.append("store closed")
        close_store(store)

    monkeypatch.setattr(Runner, "serve", serve)
    monkeypatch.setattr(serving, "wait_for_signal", signalled)
    monkeypatch.setattr(Store, "close", store_closed)
    monkeypatch.setattr(coordinator_main, "RUNNER_STOP_S", 0.3)
    monkeypatch.setattr(coordinator_main, "import_accountant_libraries", lambda: None)
    args, checked = in_process(tmp_path)

    async def main() -> int:
        stopped = await coordinator_main.serve(args, checked)
        assert "runner" not in [task.get_name() for task in asyncio.all_tasks()]
        return stopped

    assert asyncio.run(main()) == 0
    assert events == ["runner ended", "store closed"]
