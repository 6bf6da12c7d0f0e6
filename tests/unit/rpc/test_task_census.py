"""The task census: where a process's asyncio tasks wait, counted per chain of awaits."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from fedhh.rpc import task_census


async def _inner(gate: asyncio.Event) -> None:
    await gate.wait()


async def _outer(gate: asyncio.Event) -> None:
    await _inner(gate)


async def _sleeper(gate: asyncio.Event) -> None:
    await asyncio.wait_for(gate.wait(), 3600)


async def _two_kinds() -> tuple[int, list[tuple[int, str]]]:
    gate = asyncio.Event()
    waiting = [asyncio.create_task(_outer(gate)) for _ in range(3)]
    waiting.append(asyncio.create_task(_sleeper(gate)))
    await asyncio.sleep(0)  # every task reaches its first await
    try:
        return task_census.census(set(waiting))
    finally:
        gate.set()
        await asyncio.gather(*waiting)


def test_census_counts_tasks_per_await_chain() -> None:
    total, chains = asyncio.run(_two_kinds())
    assert total == 4
    assert [n for n, _ in chains] == [3, 1]
    chain = chains[0][1].split(" > ")
    assert chain[0].startswith("_outer:") and chain[1].startswith("_inner:")
    assert chain[2].startswith("Event.wait:")
    assert chains[1][1].startswith("_sleeper:")


def test_sigusr1_logs_a_census(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        task_census.install(loop)
        logged = asyncio.Event()

        class Seen(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage() == "task census":
                    loop.call_soon(logged.set)

        handler = Seen()
        logging.getLogger(task_census.__name__).addHandler(handler)
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.wait_for(logged.wait(), 60)
        finally:
            logging.getLogger(task_census.__name__).removeHandler(handler)
            loop.remove_signal_handler(signal.SIGUSR1)

    with caplog.at_level(logging.INFO, logger=task_census.__name__):
        asyncio.run(main())
    record = next(r for r in caplog.records if r.getMessage() == "task census")
    assert record.tasks >= 1  # type: ignore[attr-defined]
    assert any("main:" in c["chain"] for c in record.chains)  # type: ignore[attr-defined]
