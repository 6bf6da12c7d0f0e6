"""The coordinator's network link facing an aggregation service that refuses it: a round whose
result is refused (an answer no later read changes) is cancelled and settled at once by the
service's word, free where it ended before unmasking; a refused control token settles no
attempt: the runner stops with the run and its open attempt as they are, uncharged, and a
coordinator started with the service's token settles it by the service's word. Before, the
refused read was tried again till the round's deadline (it escaped the link where the client
said it); a coordinator restarted with a wrong --control-token-file charged every attempt it
found open at n_min.

test_link_charging's fake service and devices, told here to refuse chosen calls.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_link_charging import (
    DEVICES,
    Coordinator,
    FakeCombiner,
    Fleet,
    Plan,
    attempts,
    config,
    every,
    spends,
    stopped_once_opened,
)

from fedhh_coordinator.aggregation import (
    AggregatorOutcome,
    AggregatorRefused,
    ControlTokenRefused,
)
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

REFUSED_READ = ("the combiner refused GetResult (UNIMPLEMENTED: an older combiner); --aggregator "
                "must name a fedhh aggregator or combiner of this version")
TOKEN_REFUSAL = ("the combiner refused GetOutcome (UNAUTHENTICATED: missing or invalid control "
                 "token); the coordinator's --control-token-file must hold the token the "
                 "service was started with")
ENDED_FREE = AggregatorOutcome("aborted", reached_unmask=False, reason="cancelled")


def test_a_refused_result_is_cancelled_and_settled_at_once_by_the_services_word(
        tmp_path: Path) -> None:
    """The first attempt's read is refused while the service says the round runs: it is
    cancelled, and the service's word (ended before unmasking) makes it free; the next
    attempt releases. The patience (an hour) and the round's deadline are not waited out."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys)
    first: list[bytes] = []
    read, answered = combiner.sharded_result, combiner.outcome

    async def sharded_result(round_id: bytes, *args: Any) -> Any:
        if not first or first == [round_id]:
            first[:] = [round_id]
            raise AggregatorRefused(REFUSED_READ)
        return await read(round_id, *args)

    async def outcome(round_id: bytes) -> AggregatorOutcome:
        if [round_id] == first:
            return ENDED_FREE if round_id in combiner.cancelled else \
                AggregatorOutcome("running", stage="SHARE_KEYS")
        return await answered(round_id)

    combiner.sharded_result = sharded_result  # type: ignore[method-assign]
    combiner.outcome = outcome  # type: ignore[method-assign]

    async def go() -> None:
        await create_run(store, config(), "run")
        coordinator = Coordinator(store, fleet, combiner)
        coordinator.runner.aggregator_patience_s = 3600.0
        await asyncio.wait_for(coordinator.drive("run"), 60)

    asyncio.run(go())
    assert [a[:2] for a in attempts(store, "run")] == [(1, "aborted"), (2, "released")]
    assert REFUSED_READ in store.rounds("run")[0].reason
    assert combiner.cancelled[:1] == first
    assert spends(store, "run") == [(0, 2, DEVICES)]


def test_a_coordinator_restarted_with_a_wrong_token_settles_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys, stalls=True)
    stopped_once_opened(store, fleet, combiner)
    assert attempts(store, "run") == [(1, "open", 0)]
    opened = combiner.opened[0][0]
    wrong = FakeCombiner(Plan(every("released")), fleet.keys, tasks=combiner.tasks,
                         opened=combiner.opened)

    async def refuse(round_id: bytes) -> AggregatorOutcome:
        raise ControlTokenRefused(TOKEN_REFUSAL)

    wrong.outcome = refuse  # type: ignore[method-assign]

    async def second_life() -> None:
        # (the runner's serve, as the coordinator runs it: the error stops it, the run not
        # marked failed)
        with pytest.raises(ControlTokenRefused, match="--control-token-file"):
            await asyncio.wait_for(Coordinator(store, fleet, wrong).runner.serve(), 60)

    asyncio.run(second_life())
    assert attempts(store, "run") == [(1, "open", 0)]  # before: (1, "lost", 0)
    assert spends(store, "run") == []  # before: [(0, 1, N_MIN)]
    assert store.run("run").state == "running" and wrong.cancelled == []
    right = FakeCombiner(Plan(every("released")), fleet.keys, tasks=combiner.tasks,
                         opened=combiner.opened)
    word = right.outcome

    async def outcome(round_id: bytes) -> AggregatorOutcome:
        return ENDED_FREE if round_id == opened else await word(round_id)

    right.outcome = outcome  # type: ignore[method-assign]

    async def third_life() -> None:
        await asyncio.wait_for(Coordinator(store, fleet, right).drive("run"), 60)

    asyncio.run(third_life())
    assert [a[:2] for a in attempts(store, "run")] == [(1, "aborted"), (2, "released")]
    assert spends(store, "run") == [(0, 2, DEVICES)]
