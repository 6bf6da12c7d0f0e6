"""The coordinator's network link settling a round it was interrupted in: a deadline's cancel
that finds the service restarting is tried again before the round's outcome decides the
charge, the cancel and the outcome sharing one patience; a service that refuses to say what
became of a round has it settled at once, charged at n_min; and a coordinator stopped while a
released sum's charge waits for the store leaves that sum held for the next process to charge
and read.

test_link_charging's fake service and devices, told here to fail chosen calls.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_link_charging import (
    DEVICES,
    N_MIN,
    SHARD,
    Coordinator,
    FakeCombiner,
    Fleet,
    Plan,
    attempts,
    config,
    every,
    flaky_charges,
    spends,
)

from fedhh.secagg import ReleaseEvidence
from fedhh_coordinator import link
from fedhh_coordinator.aggregation import (
    AggregatorOutcome,
    AggregatorRefused,
    AggregatorUnavailable,
)
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


def drive(store: Store, fleet: Fleet, combiner: FakeCombiner, patience_s: float | None = None,
          **overrides: Any) -> None:
    """A run of ``config(**overrides)`` driven by a coordinator over ``combiner`` till it
    ends; ``patience_s``: the coordinator's for an aggregation service away."""
    async def go() -> None:
        await create_run(store, config(**overrides), "run")
        coordinator = Coordinator(store, fleet, combiner)
        coordinator.runner.aggregator_poll_s = 0.001  # polls, not a timing assumption
        if patience_s is not None:
            coordinator.runner.aggregator_patience_s = patience_s
        await asyncio.wait_for(coordinator.drive("run"), 60)

    asyncio.run(go())


def test_a_cancel_at_the_deadline_is_tried_again_while_the_service_restarts(
        tmp_path: Path) -> None:
    """The first attempt's round passes its deadline (its result call times out) while the
    service is restarting: the link's cancel finds it unreachable twice, then reaches it,
    and the round, cancelled before unmasking, costs nothing; the next attempt releases.
    Before, the cancel was one try: the service ran on, its outcome said "running", and the
    attempt was charged at n_min as one that might still unmask."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, SHARD)
    combiner = FakeCombiner(Plan(lambda a: ["released"]), fleet.keys, sharded=False)
    single_result = combiner.single_result
    cancels: list[str] = []

    async def times_out_first(round_id: bytes, dimension: int, timeout_s: float,
                              on_release: Callable[[ReleaseEvidence], Awaitable[None]]
                              ) -> tuple[np.ndarray, int]:
        if round_id.decode().split("/")[2] == "1":
            raise TimeoutError  # (the round's deadline, and its slack, passed)
        return await single_result(round_id, dimension, timeout_s, on_release)

    async def cancel(round_id: bytes) -> None:
        if len(cancels) < 2:
            cancels.append("unreachable")
            raise AggregatorUnavailable("UNAVAILABLE")
        cancels.append("cancelled")
        combiner.cancelled.append(round_id)

    async def outcome(round_id: bytes) -> AggregatorOutcome:
        if round_id in combiner.cancelled:
            return AggregatorOutcome("aborted", reason="cancelled by the coordinator")
        return AggregatorOutcome("running", stage="SHARE_KEYS")

    combiner.single_result = times_out_first  # type: ignore[method-assign]
    combiner.cancel = cancel  # type: ignore[method-assign]
    combiner.outcome = outcome  # type: ignore[method-assign]

    drive(store, fleet, combiner, shard_size=None, target_devices=SHARD)
    assert cancels == ["unreachable", "unreachable", "cancelled"]
    assert attempts(store, "run") == [(1, "aborted", 0), (2, "released", SHARD)]
    assert spends(store, "run") == [(0, 2, SHARD)]


def first_attempt_past_its_deadline(combiner: FakeCombiner) -> None:
    """The first attempt's result call times out (its deadline and slack passed); the later
    attempts' rounds release."""
    single_result = combiner.single_result

    async def times_out_first(round_id: bytes, dimension: int, timeout_s: float,
                              on_release: Callable[[ReleaseEvidence], Awaitable[None]]
                              ) -> tuple[np.ndarray, int]:
        if first(round_id):
            raise TimeoutError
        return await single_result(round_id, dimension, timeout_s, on_release)

    combiner.single_result = times_out_first  # type: ignore[method-assign]


def first(round_id: bytes) -> bool:
    return round_id.decode().split("/")[2] == "1"


def settling() -> bool:
    """Whether the link asks as it settles a round (not its stage's watcher, nor the round
    summary's last look at the service's counts)."""
    return any(frame.name == "_await_sum" for frame in traceback.extract_stack())


def test_a_round_past_its_deadline_is_settled_within_one_patience(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The first attempt's round passes its deadline with the service away for good: the
    cancel is tried for the coordinator's patience, and what is left of it, nothing, is the
    outcome's; asked once more, the service silent, the attempt is settled unknown, charged at
    n_min, and the log said so as the wait began. Before, the cancel and the outcome had a
    patience each: the attempt waited twice as long (2 s here; 20 minutes at the default
    600 s) before it was settled."""
    patience_s = 1.0
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, SHARD)
    combiner = FakeCombiner(Plan(lambda a: ["released"]), fleet.keys, sharded=False)
    first_attempt_past_its_deadline(combiner)
    asked: list[tuple[str, float]] = []
    answered = combiner.outcome

    async def cancel(round_id: bytes) -> None:
        assert first(round_id)
        asked.append(("cancel", asyncio.get_running_loop().time()))
        raise AggregatorUnavailable("UNAVAILABLE")

    async def outcome(round_id: bytes) -> AggregatorOutcome:
        if not first(round_id):
            return await answered(round_id)
        if settling():
            asked.append(("outcome", asyncio.get_running_loop().time()))
        raise AggregatorUnavailable("UNAVAILABLE")

    combiner.cancel = cancel  # type: ignore[method-assign]
    combiner.outcome = outcome  # type: ignore[method-assign]

    with caplog.at_level(logging.WARNING, logger=link.log.name):
        drive(store, fleet, combiner, patience_s=patience_s, shard_size=None,
              target_devices=SHARD)
    calls = [call for call, _ in asked]
    assert calls[-1] == "outcome" and set(calls[:-1]) == {"cancel"}, calls
    # (the cancel's tries all began within the patience, the first at once)
    assert asked[-2][1] - asked[0][1] < patience_s
    assert [a[:2] for a in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    assert "stayed unreachable for 1 s" in store.rounds("run")[0].reason
    assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, SHARD)]
    said = [r.getMessage() for r in caplog.records if "did not finish by its deadline" in
            r.getMessage()]
    assert said == ["the round did not finish by its deadline: cancelling it at the aggregator "
                    "and asking what became of it, for up to 1 s (--aggregator-patience-"
                    "seconds) while the aggregator does not answer; past that the attempt is "
                    "settled as unknown, charged at n_min"]


def test_a_service_that_refuses_to_say_what_became_of_a_round_has_it_settled_at_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Past the first attempt's deadline the service takes the cancel, then refuses
    GetOutcome (another program took the address mid-run; a refused control token settles
    nothing instead: test_link_settles_refusals): no wait changes that answer, so the
    attempt is settled at once as unknown, charged at n_min (nobody can rule out that its
    unmasking began), the refusal and what to do about it in its reason and in the log; the
    next attempt releases. The coordinator's patience (an hour here) is not waited out.
    Before, the refusal escaped the link (an error of its own kind from the client), the run
    failed with the attempt open and uncharged; one the client leaves a status (UNIMPLEMENTED)
    read as the service away and was asked again for the whole patience."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, SHARD)
    combiner = FakeCombiner(Plan(lambda a: ["released"]), fleet.keys, sharded=False)
    first_attempt_past_its_deadline(combiner)
    answered = combiner.outcome
    refused: list[bytes] = []
    refusal = ("the aggregator refused GetOutcome (UNIMPLEMENTED: not served); --aggregator "
               "must name a fedhh aggregator or combiner of this version")

    async def outcome(round_id: bytes) -> AggregatorOutcome:
        if first(round_id):
            refused.append(round_id)
            raise AggregatorRefused(refusal)
        return await answered(round_id)

    combiner.outcome = outcome  # type: ignore[method-assign]

    with caplog.at_level(logging.ERROR, logger=link.log.name):
        drive(store, fleet, combiner, patience_s=3600.0, shard_size=None,
              target_devices=SHARD)
    assert store.run("run").state == "done"
    assert [a[:2] for a in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, SHARD)]
    reason = store.rounds("run")[0].reason
    assert "nobody can say whether unmasking began" in reason and refusal in reason
    assert combiner.cancelled[:1] == [combiner.opened[0][0]]
    logged = [r for r in caplog.records if "refused to say what became of a round" in
              r.getMessage()]
    assert len(logged) == 1 and refusal in logged[0].error  # type: ignore[attr-defined]


def test_a_coordinator_stopped_while_a_charge_waits_for_the_store_leaves_the_sum_held(
        tmp_path: Path) -> None:
    """The store is away as a released total's charge is written, and the coordinator is
    stopped while the charge waits for it: the total stays held unread at the service (no
    drop), so the next process, the store back, charges the attempt once at its count and
    reads it. Before, the stop dropped the total: the next process found it gone, settled
    the attempt lost at n_min and ran the round again (two charges, the first for nothing)."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys, holds_sum=True)
    failed = flaky_charges(store, 1_000_000)
    waiting = asyncio.Event()
    flaky = store.charge_round

    def charge_round(*args: Any, **kwargs: Any) -> None:
        try:
            flaky(*args, **kwargs)
        finally:
            if failed:
                waiting.set()

    store.charge_round = charge_round  # type: ignore[method-assign]

    async def first_life() -> None:
        await create_run(store, config(), "run")
        coordinator = Coordinator(store, fleet, combiner)
        coordinator.runner.charge_retry_s = 0.001
        drive = asyncio.create_task(coordinator.drive("run"))
        await asyncio.wait_for(waiting.wait(), 60)
        drive.cancel()
        with pytest.raises(asyncio.CancelledError):
            await drive

    asyncio.run(first_life())
    assert failed and attempts(store, "run") == [(1, "open", 0)]
    assert combiner.cancelled == []  # before: the total dropped unread
    del store.charge_round  # (the store takes writes again)
    successor = FakeCombiner(Plan(every("released")), fleet.keys, tasks=combiner.tasks,
                             opened=combiner.opened, cancelled=combiner.cancelled,
                             holds_sum=True)

    async def second_life() -> None:
        await asyncio.wait_for(Coordinator(store, fleet, successor).drive("run"), 60)

    asyncio.run(second_life())
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert successor.calls == 1 and store.run("run").state == "done"


@pytest.mark.parametrize("again", ["the same", "another", "over other shards"])
def test_a_read_broken_off_after_the_charge_reads_the_held_sum_again(
        tmp_path: Path, again: str) -> None:
    """The total's read breaks off after its charge (the combiner unreachable mid-stream)
    while the combiner still holds it: it is read again under the one charge, and the round
    released by its first attempt. A total read again that is not the one charged (rebuilt
    from fewer shards meanwhile) is refused unread and dropped, the attempt lost at its one
    charge. Before, either way the attempt was lost, charged, and the round ran again,
    charged again. So is a total of the same charge over other shards: with a shard lost
    outside it, the charge is n_min whatever shards it holds (before, the count alone was
    compared: that other total was read under the first's charge, the round's reports read
    in two sums)."""
    broke: list[int] = []

    def after_hook(attempt: int) -> str:
        broke.append(attempt)
        return "unreachable" if len(broke) == 1 else "deliver"

    def fates(attempt: int) -> list[str]:
        if attempt == 1 and again == "another" and broke:
            return ["released", "released", "aborted"]
        if attempt == 1 and again == "over other shards":
            return ["released", "lost", "lost"] if broke else ["released", "released", "lost"]
        return ["released"] * 3

    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(fates, after_hook=after_hook), fleet.keys, holds_sum=True)

    drive(store, fleet, combiner)
    first = combiner.opened[0][0]
    if again == "the same":
        assert attempts(store, "run") == [(1, "released", DEVICES)]
        assert spends(store, "run") == [(0, 1, DEVICES)]
        assert combiner.calls == 2 and combiner.cancelled == []
        assert combiner.delivered == [first]
    else:
        charged = DEVICES if again == "another" else N_MIN
        assert [a[:2] for a in attempts(store, "run")] == [(1, "lost"), (2, "released")]
        assert (f"is not the one charged at {charged}: refused unread"
                in store.rounds("run")[0].reason)
        assert spends(store, "run") == [(0, 1, charged), (0, 2, DEVICES)]
        assert combiner.cancelled == [first]  # (dropped unread)


def test_a_read_broken_off_by_a_combiner_restart_waits_for_the_total_rebuilt(
        tmp_path: Path) -> None:
    """The combiner is restarted while its total is read, after the charge: back, it takes
    the released round over and rebuilds the total from its workers' held sums, the round
    said running meanwhile. The link reads the total again once it is rebuilt, under the one
    charge. Before, the read again waited only for a round said released with its sum: the
    rebuilding combiner's first answer lost the attempt, charged, and the round ran again,
    charged again."""
    broke: list[int] = []

    def after_hook(attempt: int) -> str:
        broke.append(attempt)
        return "unreachable" if len(broke) == 1 else "deliver"

    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released"), after_hook=after_hook), fleet.keys,
                            holds_sum=True)
    held = combiner.outcome
    rebuilding: list[bytes] = []

    async def outcome(round_id: bytes) -> AggregatorOutcome:
        # (back, until the total is read again)
        if broke and combiner.calls == 1 and round_id == combiner.opened[0][0]:
            rebuilding.append(round_id)
            return AggregatorOutcome("running", stage="UNMASK")
        return await held(round_id)

    combiner.outcome = outcome  # type: ignore[method-assign]

    drive(store, fleet, combiner)
    assert rebuilding  # (the link heard it)
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert combiner.calls == 2 and combiner.cancelled == []
