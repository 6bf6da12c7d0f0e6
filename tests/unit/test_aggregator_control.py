"""The control handlers the aggregator and the combiner share (fedhh_aggregator.control): a
reported outcome is forgotten and counted in both services, a held sum once the coordinator
says it read it; the combiner's outcome merges its shards'. Fake registries and rounds: no
network."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY

from fedhh.errors import StateError
from fedhh.rpc.control_client import RoundOutcome
from fedhh.secagg import SignedConfig, Stage
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator.combined import Shard
from fedhh_aggregator.control import ResultReport, RoundControl, ShardedRoundControl
from fedhh_aggregator.control_wire import outcome_to_pb
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome
from fedhh_aggregator.rounds import RoundState


def _metric(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


@dataclass
class _FakeRegistry:
    round_: Any
    durable: bool = False
    fetcher: str = "the coordinator"
    forgotten: list[tuple[str, bool]] = field(default_factory=list)

    def by_round(self, round_id: bytes) -> Any:
        return self.round_

    def forget(self, round_: Any, why: str, *, delivered: bool = False) -> None:
        self.forgotten.append((why, delivered))

    async def cancel(self, round_id: bytes) -> RoundState:
        return self.round_.state


def _round(state: RoundState, *, released: bool = False) -> SimpleNamespace:
    result = SimpleNamespace(num_contributors=3, total=np.arange(4), survivors=(1, 2, 3),
                             signatures=((1, b"s"),)) if released else None

    async def wait_finished(wait_s: float) -> RoundState:
        return state

    return SimpleNamespace(
        state=state, round_id=b"r", session_id=b"\0" * 32, reached_unmask=released,
        abort_reason="" if released else "too_few_devices", wait_finished=wait_finished,
        config=SimpleNamespace(round_id=b"r", dimension=4, modulus_bits=16), result=result,
        dimension=4, modulus_bits=16, shards=[], contributors=3 if released else 0,
        total=result.total if result is not None else None,
        settle_as_released=lambda: False)  # (a combiner's round not taken over after release)


def _count(kind: str, outcome: str) -> float:
    if kind == "aggregator":
        return _metric("fedhh_aggregator_rounds_delivered_total" if outcome == "delivered"
                       else "fedhh_aggregator_rounds_abort_reported_total")
    return _metric("fedhh_combiner_rounds_total", {"outcome": outcome})


def _handler(kind: str, registry: _FakeRegistry) -> Any:
    return (RoundControl if kind == "aggregator" else ShardedRoundControl)(registry)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["aggregator", "combiner"])
@pytest.mark.parametrize("state", [RoundState.ABORTED, RoundState.RELEASED, RoundState.RUNNING])
def test_both_services_forget_and_count_a_reported_outcome(kind: str, state: RoundState) -> None:
    registry = _FakeRegistry(_round(state, released=state == RoundState.RELEASED))
    before = {o: _count(kind, o) for o in ("aborted", "delivered")}
    sent: list[ResultReport] = []

    async def send(report: ResultReport) -> None:
        sent.append(report)

    asyncio.run(_handler(kind, registry).get_result(b"r", 0, send))
    assert [r.state for r in sent] == [state]
    after = {o: _count(kind, o) - before[o] for o in before}
    if state == RoundState.RUNNING:
        assert (registry.forgotten, after) == ([], {"aborted": 0, "delivered": 0})
    elif state == RoundState.ABORTED:
        assert sent[0].abort_reason == "too_few_devices" and sent[0].total is None
        assert [d for _, d in registry.forgotten] == [False]
        assert after == {"aborted": 1, "delivered": 0}
    else:
        assert sent[0].total is not None and sent[0].num_contributors == 3
        assert [d for _, d in registry.forgotten] == [True]
        assert after == {"aborted": 0, "delivered": 1}


@pytest.mark.parametrize("kind", ["aggregator", "combiner"])
def test_a_delivered_sum_is_not_sent_twice(kind: str) -> None:
    round_ = _round(RoundState.RELEASED, released=True)
    round_.result = round_.total = None
    registry = _FakeRegistry(round_)

    async def send(report: ResultReport) -> None:
        raise AssertionError("nothing is sent")

    with pytest.raises(StateError):
        asyncio.run(_handler(kind, registry).get_result(b"r", 0, send))
    assert registry.forgotten == []


@pytest.mark.parametrize("kind", ["aggregator", "combiner"])
@pytest.mark.parametrize("cut", [asyncio.CancelledError, ConnectionResetError])
def test_an_abort_report_not_read_still_forgets_the_round(kind: str,
                                                           cut: type[BaseException]) -> None:
    """The coordinator left while its abort report was written (its call cancelled, or the
    write cut): the round is forgotten all the same, and not counted as reported."""
    registry = _FakeRegistry(_round(RoundState.ABORTED))
    before = _count(kind, "aborted")

    async def send(report: ResultReport) -> None:
        raise cut

    with pytest.raises(cut):
        asyncio.run(_handler(kind, registry).get_result(b"r", 0, send))
    assert [d for _, d in registry.forgotten] == [False]
    assert _count(kind, "aborted") == before


@pytest.mark.parametrize("kind", ["aggregator", "combiner"])
def test_a_released_sum_not_read_is_kept(kind: str) -> None:
    registry = _FakeRegistry(_round(RoundState.RELEASED, released=True))

    async def send(report: ResultReport) -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(_handler(kind, registry).get_result(b"r", 0, send))
    assert registry.forgotten == []  # the coordinator asks again for the sum


@pytest.mark.parametrize("kind", ["aggregator", "combiner"])
def test_a_held_sum_sent_whole_is_kept_until_the_coordinator_says_it_read_it(kind: str) -> None:
    """GetResult's hold: a sum handed to the transport whole may be unread (the coordinator's
    charge waiting for its store); it is sent again to the next GetResult, and dropped, as
    delivered, once CancelRound says it was read. Before, it was dropped once sent."""
    registry = _FakeRegistry(_round(RoundState.RELEASED, released=True))
    before = _count(kind, "delivered")
    sent: list[ResultReport] = []

    async def send(report: ResultReport) -> None:
        sent.append(report)

    async def fetched_twice_then_read() -> RoundState:
        handler = _handler(kind, registry)
        await handler.get_result(b"r", 0, send, hold=True)
        await handler.get_result(b"r", 0, send, hold=True)
        assert registry.forgotten == [] and _count(kind, "delivered") == before
        return await handler.cancel(b"r", delivered=True)

    assert asyncio.run(fetched_twice_then_read()) == RoundState.RELEASED
    assert [r.total is not None and r.num_contributors == 3 for r in sent] == [True, True]
    assert [d for _, d in registry.forgotten] == [True]
    assert _count(kind, "delivered") == before + 1


@pytest.mark.parametrize("kind", ["aggregator", "combiner"])
def test_a_running_round_told_delivered_is_cancelled_as_ever(kind: str) -> None:
    registry = _FakeRegistry(_round(RoundState.RUNNING))
    handler = _handler(kind, registry)
    assert asyncio.run(handler.cancel(b"r", delivered=True)) == RoundState.RUNNING
    assert registry.forgotten == []


def test_the_combiners_outcome_merges_its_shards() -> None:
    signed = SignedConfig(b"", b"")
    shards = [Shard(i, signed, SimpleNamespace(round_id=b"r/%d" % i), i)  # type: ignore[arg-type]
              for i in range(3)]
    shards[2].state, shards[2].reason, shards[2].reached_unmask = RoundState.ABORTED, "x", True
    live = [RoundOutcome("running", stage=Stage.MASKED_INPUT,
                         stage_devices=((Stage.ADVERTISE_KEYS, 5), (Stage.SHARE_KEYS, 4))),
            RoundOutcome("running", stage=Stage.SHARE_KEYS,
                         stage_devices=((Stage.ADVERTISE_KEYS, 6),)),
            None]
    record = RecordedOutcome(OutcomeState.RUNNING, b"\1" * 32)

    async def live_outcomes() -> list[RoundOutcome | None]:
        return live

    registry = SimpleNamespace(
        durable=True, outcome=lambda round_id: (record, tuple(shards)), pool=[],
        by_round=lambda round_id: SimpleNamespace(live_outcomes=live_outcomes))
    outcome = asyncio.run(ShardedRoundControl(registry).outcome(b"r"))  # type: ignore[arg-type]
    assert outcome.stage == Stage.SHARE_KEYS  # the earliest running shard's
    assert outcome.stage_devices == ((Stage.ADVERTISE_KEYS, 11), (Stage.SHARE_KEYS, 4))
    assert outcome.reached_unmask is False
    message = outcome_to_pb(outcome, registry.durable)
    assert (message.state, message.durable) == (pb.OUTCOME_STATE_RUNNING, True)
    assert [(s.round_id, s.worker, s.state) for s in message.shards] == [
        (b"r/0", 0, pb.OUTCOME_STATE_RUNNING), (b"r/1", 1, pb.OUTCOME_STATE_RUNNING),
        (b"r/2", 2, pb.OUTCOME_STATE_ABORTED)]
    assert (message.shards[2].abort_reason, message.shards[2].reached_unmask) == ("x", True)
    unknown = SimpleNamespace(durable=False, outcome=lambda round_id: None)
    handler = ShardedRoundControl(unknown)  # type: ignore[arg-type]
    assert asyncio.run(handler.outcome(b"r")).state == OutcomeState.UNKNOWN


def _worker(outcome: RoundOutcome | None) -> SimpleNamespace:
    """A worker whose control answers ``outcome`` (None: it does not answer)."""
    async def answer(round_id: bytes) -> RoundOutcome:
        if outcome is None:
            raise StateError("the worker cannot say")
        return outcome

    return SimpleNamespace(control=SimpleNamespace(outcome=answer))


def test_the_combiners_outcome_counts_its_shards_declines_also_once_they_finished() -> None:
    """The combiner keeps no counts of its own: a finished shard's (per stage, and the members
    that gave up their seats) are its worker's word, summed as a running shard's are. The
    coordinator names them in a too-few abort's reason, asked once every shard has finished:
    before, such a round's counts were empty and its declines unsaid."""
    signed = SignedConfig(b"", b"")
    shards = [Shard(i, signed, SimpleNamespace(round_id=b"r/%d" % i), i)  # type: ignore[arg-type]
              for i in range(4)]
    for shard in shards[1:]:
        shard.state, shard.reason = RoundState.ABORTED, "too_few_devices"
    live = [RoundOutcome("running", stage=Stage.ADVERTISE_KEYS, declined=1), None, None, None]
    said = {1: RoundOutcome("aborted", stage_devices=((Stage.ADVERTISE_KEYS, 3),), declined=4),
            2: RoundOutcome("aborted", stage_devices=((Stage.ADVERTISE_KEYS, 5),)),  # older
            3: None}  # unreachable
    record = RecordedOutcome(OutcomeState.RUNNING, b"\1" * 32)

    async def live_outcomes() -> list[RoundOutcome | None]:
        return live

    registry = SimpleNamespace(
        durable=True, outcome=lambda round_id: (record, tuple(shards)),
        pool=[_worker(None)] + [_worker(said[i]) for i in (1, 2, 3)],
        by_round=lambda round_id: SimpleNamespace(live_outcomes=live_outcomes))
    outcome = asyncio.run(ShardedRoundControl(registry).outcome(b"r"))  # type: ignore[arg-type]
    assert outcome.declined == 5
    assert outcome.stage_devices == ((Stage.ADVERTISE_KEYS, 8),)
    message = outcome_to_pb(outcome, True)
    assert message.HasField("declined") and message.declined == 5
    assert [s.HasField("declined") and s.declined for s in message.shards] == [1, 4, False,
                                                                                 False]
    # The finished shards' states stay the combiner's own.
    assert [s.state for s in message.shards[1:]] == [pb.OUTCOME_STATE_ABORTED] * 3

    # No worker says (all older): the count is unknown, not "none declined".
    live[0] = RoundOutcome("running", stage=Stage.ADVERTISE_KEYS)
    said[1] = RoundOutcome("aborted")
    registry.pool = [_worker(None)] + [_worker(said[i]) for i in (1, 2, 3)]
    outcome = asyncio.run(ShardedRoundControl(registry).outcome(b"r"))  # type: ignore[arg-type]
    assert outcome.declined is None
    assert not outcome_to_pb(outcome, True).HasField("declined")
