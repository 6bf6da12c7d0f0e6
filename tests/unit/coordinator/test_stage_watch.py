"""The coordinator's stage watch (``NetworkLink._watch_stage``) shows the aggregation service's
stage in the run's progress with one long-poll at a time, each carrying what the last answer
showed, so the service answers as the stage changes. Before, it asked the service every second
for as long as the round ran (a TLS call of about 1 ms of CPU a side, and at a combiner one
more to each of its workers). A service that answers at once (a version before the long-poll)
is asked again at the old pace. Stand-in service: no network."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from fedhh_coordinator import link
from fedhh_coordinator.aggregation import AggregatorOutcome
from fedhh_coordinator.link import NetworkLink
from fedhh_coordinator.progress import Progress


class Service:
    """Answers each watch with the next outcome the test gives it."""

    def __init__(self) -> None:
        self.answers: asyncio.Queue[AggregatorOutcome] = asyncio.Queue()
        self.asks: list[tuple[AggregatorOutcome | None, float]] = []
        self.asked = asyncio.Event()

    async def watch(self, round_id: bytes, seen: AggregatorOutcome | None, wait_s: float
                    ) -> AggregatorOutcome:
        self.asks.append((seen, wait_s))
        self.asked.set()
        return await self.answers.get()


async def _asks(service: Service, n: int) -> None:
    while len(service.asks) < n:
        service.asked.clear()
        await asyncio.wait_for(service.asked.wait(), 30)


def _watch(progress: Progress, service: Service) -> asyncio.Task[None]:
    owner: Any = SimpleNamespace(progress=progress)
    return asyncio.create_task(NetworkLink._watch_stage(owner, SimpleNamespace(round_id=b"r"),  # type: ignore[arg-type]
                                                        service))  # type: ignore[arg-type]


def test_the_watch_asks_once_per_change_with_what_it_saw() -> None:
    advertising = AggregatorOutcome("running", stage="ADVERTISE_KEYS", watched=True)
    sharing = AggregatorOutcome("running", stage="SHARE_KEYS",
                                stage_devices={"ADVERTISE_KEYS": 5}, watched=True)

    async def go() -> tuple[Progress, Service]:
        progress, service = Progress(), Service()
        watch = _watch(progress, service)
        try:
            await _asks(service, 1)
            service.answers.put_nowait(advertising)
            await _asks(service, 2)
            service.answers.put_nowait(sharing)
            await _asks(service, 3)
        finally:
            watch.cancel()
        return progress, service

    progress, service = asyncio.run(go())
    assert [seen for seen, _ in service.asks] == [None, advertising, sharing]
    assert all(wait == link.STAGE_WATCH_WAIT_S for _, wait in service.asks)
    assert progress.stage == "SHARE_KEYS"
    assert [step for step, _ in progress.steps] == ["ADVERTISE_KEYS", "SHARE_KEYS"]
    assert progress.stage_devices == {"ADVERTISE_KEYS": 5}


def test_a_service_that_answers_at_once_is_asked_at_a_pace(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    paused: list[float] = []
    sleep = asyncio.sleep

    async def pause(seconds: float) -> None:
        paused.append(seconds)
        await sleep(0)

    monkeypatch.setattr(link.asyncio, "sleep", pause)
    old = AggregatorOutcome("running", stage="ADVERTISE_KEYS")  # (not watched)

    async def go() -> Service:
        service = Service()
        for _ in range(3):
            service.answers.put_nowait(old)
        watch = _watch(Progress(), service)
        try:
            await _asks(service, 4)
        finally:
            watch.cancel()
        return service

    service = asyncio.run(go())
    assert paused == [link.STAGE_WATCH_PACE_S] * 3
    assert [seen for seen, _ in service.asks] == [None, old, old, old]
