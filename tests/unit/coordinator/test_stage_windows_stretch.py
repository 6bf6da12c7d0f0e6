"""The stage windows of a round's next attempt after an abort for too few devices in time
(``fedhh_coordinator.stretch``): longer when devices took part and then missed a stage's window,
the configured ones when they refused the round (never reaching the aggregator).

The real runner, round driver, network link, lobby and store; the aggregation service is
test_link_charging's fake, told here to abort chosen attempts for too few devices with chosen
per-stage counts."""

from __future__ import annotations

import argparse
import asyncio
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_link_charging import SHARD, Coordinator, FakeCombiner, Fleet, Plan, attempts, config

from fedhh.cli.options import add_outcome_options
from fedhh.errors import RoundAborted
from fedhh.rpc.control_client import AggregatorBusy
from fedhh.secagg import RoundConfig
from fedhh.secagg.config import MAX_ROUND_S
from fedhh_aggregator.rounds import Limits, check_last_deadline
from fedhh_coordinator.aggregation import AggregatorOutcome
from fedhh_coordinator.link import NetworkLink
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store
from fedhh_coordinator.stretch import (
    CAP,
    STRETCH,
    STRETCH_MAX,
    STRETCHED_ROUND_MAX_MS,
    next_stretch,
)
from fedhh_coordinator.stretch import LATE as LATE_MARK
from fedhh_coordinator.stretch import REFUSED as REFUSED_MARK

STAGE_MS = 20_000
LATE = {"ADVERTISE_KEYS": SHARD, "SHARE_KEYS": 3}  # all took part; 3 in time at key sharing
REFUSED = {"ADVERTISE_KEYS": 3, "SHARE_KEYS": 3}  # 5 never came: they refused the round


@dataclass
class ShortService(FakeCombiner):
    """A single aggregator that aborts the attempts of ``short`` (by round and attempt) for
    too few devices, with those per-stage counts, and releases the others."""

    short: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)

    def _short(self, round_id: bytes) -> dict[str, int] | None:
        _, round_, attempt, *_ = round_id.decode().split("/")
        return self.short.get((int(round_), int(attempt)))

    async def single_result(self, round_id: bytes, dimension: int, timeout_s: float,
                            on_release: Any) -> Any:
        if self._short(round_id) is not None:
            raise RoundAborted("the aggregator aborted the round: too_few_devices")
        return await super().single_result(round_id, dimension, timeout_s, on_release)

    async def outcome(self, round_id: bytes) -> AggregatorOutcome:
        stages = self._short(round_id)
        if stages is not None:
            return AggregatorOutcome("aborted", reason="too_few_devices", stage_devices=stages)
        return AggregatorOutcome("released", True, False)


@dataclass
class LimitedService(ShortService):
    """A ``ShortService`` started with a --max-round-seconds below the default: it refuses to
    open a round whose last deadline is more than ``max_round_s`` ahead, by the service's own
    check."""

    max_round_s: float = MAX_ROUND_S
    # the attempts (round, attempt) it refuses busy, as one that holds its --max-rounds does
    busy: frozenset[tuple[int, int]] = frozenset()

    async def open_single(self, signed: Any) -> None:
        config = RoundConfig.from_bytes(signed.payload)
        _, round_, attempt, *_ = config.round_id.decode().split("/")
        if (int(round_), int(attempt)) in self.busy:
            raise AggregatorBusy("aggregator: the aggregator already holds 16 rounds")
        check_last_deadline(config, self.max_round_s, "the round")
        await super().open_single(signed)


def drive(tmp_path: Path, short: dict[tuple[int, int], dict[str, int]],
          max_round_s: float = MAX_ROUND_S,
          busy: frozenset[tuple[int, int]] = frozenset()) -> tuple[Store, list[RoundConfig]]:
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, SHARD)
    service = LimitedService(Plan(lambda a: ["released"]), fleet.keys, sharded=False,
                             short=short, max_round_s=max_round_s, busy=busy)

    async def go() -> None:
        await create_run(store, config(shard_size=None, target_devices=SHARD, rounds=1,
                                       max_attempts=4, stage_ms=STAGE_MS), "run")
        await asyncio.wait_for(Coordinator(store, fleet, service).drive("run"), 60)

    asyncio.run(go())
    return store, [shards[0].config for _, shards in service.opened]


def windows(config: RoundConfig) -> list[int]:
    """The windows of the stages after the first (the first's start is not in the config)."""
    d = config.deadlines
    ends = [d.advertise_keys, d.share_keys, d.masked_input, d.consistency_check, d.unmask]
    return [end - start for start, end in itertools.pairwise(ends)]


def test_an_attempt_short_of_devices_in_time_gives_the_next_longer_windows(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """On a loaded host, round 3 of `fedhh up` aborted 4 times at key sharing (1,053 to 1,215
    devices in time of 1,248 needed), each retry with the same windows: it never released."""
    store, opened = drive(tmp_path, {(1, 1): LATE, (1, 2): LATE})
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [
        (1, "aborted"), (2, "aborted"), (3, "released")]
    assert [windows(c) for c in opened] == [[STAGE_MS * f] * 4 for f in (1, 2, 4)]
    assert [r.summary[STRETCH] for r in store.rounds("run")] == [1, 2, 4]
    said = [r.getMessage() for r in caplog.records if "stage windows" in r.getMessage()]
    assert said == [f"attempt {a} of round 1: stage windows x{f} after too few devices in time"
                    for a, f in ((2, 2), (3, 4))]


def test_devices_that_refused_the_round_do_not_stretch_the_windows(tmp_path: Path) -> None:
    store, opened = drive(tmp_path, {(1, 1): REFUSED})
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "aborted"), (2, "released")]
    assert [windows(c) for c in opened] == [[STAGE_MS] * 4] * 2


def test_the_stretch_stops_at_its_cap_and_at_the_last_deadline_a_service_accepts() -> None:
    late = {STRETCH: STRETCH_MAX, LATE_MARK: True}
    assert next_stretch(late, [10_000] * 5) == STRETCH_MAX
    # 5 windows of 200 s: x4 would put the last deadline 4,000 s ahead (the aggregation
    # service accepts an hour), so x2.
    assert next_stretch({STRETCH: 2, LATE_MARK: True}, [200_000] * 5) == 2
    assert next_stretch({STRETCH: 1, LATE_MARK: True}, [3_000_000] * 5) == 1
    # an abort for another reason keeps the attempt's stretch
    assert next_stretch({STRETCH: 4, LATE_MARK: False}, [10_000] * 5) == 4
    # a round's first attempt (its previous round released) runs the configured windows
    assert next_stretch(None, [10_000] * 5) == 1
    # after a stretch the service refused to open: half of it, then no more than that
    assert next_stretch({STRETCH: 4, REFUSED_MARK: True}, [10_000] * 5) == 2
    assert next_stretch({STRETCH: 2, LATE_MARK: True, CAP: 2}, [10_000] * 5) == 2


def test_a_stretch_the_service_refuses_is_not_asked_of_it_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A service started with --max-round-seconds 150 refuses the x2 attempt's windows (5 of
    40 s end 200 s ahead): the round's later attempts stretch at most half as far, after
    another late abort too. Before, each later attempt asked for x2 or more again, was refused
    the same way, and the run failed after --max-attempts (4 here)."""
    store, opened = drive(tmp_path, {(1, 1): LATE, (1, 3): LATE}, max_round_s=150)
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [
        (1, "aborted"), (2, "aborted"), (3, "aborted"), (4, "released")]
    assert [r.summary[STRETCH] for r in store.rounds("run")] == [1, 2, 1, 1]
    assert [windows(c) for c in opened] == [[STAGE_MS] * 4] * 3  # (the refused one not opened)
    refused = store.rounds("run")[1].reason
    assert "more than 150 s ahead" in refused and refused.endswith(
        "(its stage windows were stretched x2 after too few devices in time: the round's next "
        "attempts stretch them at most x1)")


def test_a_stretched_attempt_refused_busy_keeps_its_stretch(tmp_path: Path) -> None:
    """A service that holds its --max-rounds refuses the x2 attempt (RESOURCE_EXHAUSTED),
    which says nothing of its windows: the next attempt keeps x2, as after any abort for
    another cause. Before, the refusal capped the round's later attempts at x1, the windows
    the late abort had shown too short."""
    store, opened = drive(tmp_path, {(1, 1): LATE}, busy=frozenset({(1, 2)}))
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [
        (1, "aborted"), (2, "aborted"), (3, "released")]
    assert [r.summary[STRETCH] for r in store.rounds("run")] == [1, 2, 2]
    assert [windows(c) for c in opened] == [[STAGE_MS] * 4, [STAGE_MS * 2] * 4]
    refused = store.rounds("run")[1]
    assert REFUSED_MARK not in refused.summary
    assert refused.reason.endswith("already holds 16 rounds"), refused.reason


@dataclass
class StoppingService(ShortService):
    """A ``ShortService`` whose result call for the attempt ``stop_at`` (round, attempt) hangs,
    for the test to stop the coordinator there."""

    stop_at: tuple[int, int] | None = None
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    async def single_result(self, round_id: bytes, dimension: int, timeout_s: float,
                            on_release: Any) -> Any:
        _, round_, attempt, *_ = round_id.decode().split("/")
        if (int(round_), int(attempt)) == self.stop_at:
            self.reached.set()
            await asyncio.Event().wait()
        return await super().single_result(round_id, dimension, timeout_s, on_release)


@pytest.mark.parametrize("stop_at", [(1, 2), (1, 3)])
def test_a_restarted_coordinator_goes_on_from_the_stretch_its_predecessor_reached(
        tmp_path: Path, stop_at: tuple[int, int]) -> None:
    """The coordinator is stopped while an attempt after a late abort runs at the aggregator
    and a new one, over the same store, drives the run on: the attempt under way is resumed
    with its windows, and the round's next attempts stretch on from them, as if no restart."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, SHARD)
    short = {(1, 1): LATE, (1, 2): LATE, (1, 3): LATE}
    first = StoppingService(Plan(lambda a: ["released"]), fleet.keys, sharded=False,
                            short=short, stop_at=stop_at)

    async def first_life() -> None:
        await create_run(store, config(shard_size=None, target_devices=SHARD, rounds=1,
                                       max_attempts=5, stage_ms=STAGE_MS), "run")
        coordinator = asyncio.create_task(Coordinator(store, fleet, first).drive("run"))
        await asyncio.wait_for(first.reached.wait(), 60)
        coordinator.cancel()  # the process dies with the attempt at the aggregator
        with pytest.raises(asyncio.CancelledError):
            await coordinator

    asyncio.run(first_life())
    second = ShortService(Plan(lambda a: ["released"]), fleet.keys, sharded=False,
                          short=short, tasks=first.tasks, opened=first.opened)

    async def second_life() -> None:
        await asyncio.wait_for(Coordinator(store, fleet, second).drive("run"), 60)

    asyncio.run(second_life())
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [
        (1, "aborted"), (2, "aborted"), (3, "aborted"), (4, "released")]
    assert [windows(shards[0].config) for _, shards in second.opened] == [
        [STAGE_MS * f] * 4 for f in (1, 2, 4, 8)]
    assert [r.summary[STRETCH] for r in store.rounds("run")] == [1, 2, 4, 8]


def test_windows_that_ended_before_the_round_opened_are_said_to_be_stretched() -> None:
    """The refusal of windows that end before the round opens (``--stage-ms 1``, meant as
    seconds) names them; stretched ones are not the flags' values, and it says so."""
    link = NetworkLink.__new__(NetworkLink)  # (only the config and the stretch are read)
    link.config, link._stretch = config(stage_ms=1), 4
    ended = SimpleNamespace(config=SimpleNamespace(deadlines=SimpleNamespace(unmask=0)))
    with pytest.raises(RoundAborted) as raised:
        link._check_windows_ahead(SimpleNamespace(cohorts=[ended]), 8)
    assert raised.value.reason.endswith(
        "they last 20 ms in all (--advertise-ms 4, --share-keys-ms 4, --masked-input-ms 4, "
        f"--consistency-ms 4, --unmask-ms 4), and drawing and signing its cohort of 8 devices "
        f"took {raised.value.reason.split(' took ')[1].split(' ms')[0]} ms; the windows are "
        "milliseconds: give longer ones (these are the configured ones stretched x4 after too "
        "few devices in time; --stage-ms sets all five configured ones)")


def test_the_services_and_the_coordinator_read_one_round_limit() -> None:
    """The hour ahead the aggregation service takes a round's last deadline, which the stretch
    stays within: one constant (before, the coordinator kept a copy of the service's)."""
    parser = argparse.ArgumentParser()
    add_outcome_options(parser)
    assert parser.parse_args([]).max_round_seconds == MAX_ROUND_S == Limits().max_round_s
    assert STRETCHED_ROUND_MAX_MS == MAX_ROUND_S * 1000
