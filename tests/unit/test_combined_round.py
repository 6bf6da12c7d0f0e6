"""The combiner's sharded round (fedhh_aggregator.combined) with stand-in workers: a released
shard sum its signed config rules out is refused and the shard settled at once; a journaling
worker that no longer knows a shard it accepted leaves it charged as reached unmasking, also
when the combiner took the round over after a restart (its journal's ``shards_opened``); a
shard sum its worker sent before the combiner stopped is held there and fetched again by the
restarted combiner, counted once, as is a total released but not yet fetched; a worker is told
its sum is delivered only once the coordinator confirmed it has the total, and to drop it once
nobody will fetch it (the total cancelled, the sum malformed, its round cancelled)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from aggregator_testkit import COORDINATOR_PUBLIC, combiner_journal, make_cohort

from fedhh.errors import NotFoundError, RoundAborted, StateError
from fedhh.rpc.aggregator_client import RoundOutcome
from fedhh.secagg import RoundConfig, SignedConfig
from fedhh.secagg.config import StageDeadlines
from fedhh_aggregator.combined import CombinedRound, CombinerLimits, Shard
from fedhh_aggregator.combiner import CombinerRegistry, Placement
from fedhh_aggregator.control import ResultReport, ShardedRoundControl
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.rounds import RoundState

DIMENSION = 8


class Worker:
    """Answers GetResult with ``total`` at once; ``told``: its CancelRounds."""

    def __init__(self, total: np.ndarray) -> None:
        self.total = total
        self.told: list[str] = []

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        self.told.append("delivered" if delivered else "dropped")

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        return SimpleNamespace(total=self.total, survivors=(1, 2, 3), signatures=(),
                               num_contributors=3)


def shard(j: int) -> Shard:
    soon = int(time.time() * 1000) + 600_000
    config = RoundConfig(round_id=f"r/1/1/s{j}".encode(), num_devices=4, dimension=DIMENSION,
                         modulus_bits=16, n_min=3, k=3, t=2, graph_seed=bytes([j]) * 32,
                         deadlines=StageDeadlines(*([soon] * 5)))
    return Shard(j, SignedConfig(config.to_bytes(), b""), config, worker=j)


class ForgetfulWorker:
    """A worker restarted on a journal that never heard of the round (another state dir, or
    another worker's): GetResult finds no such round, GetOutcome says unknown, durably."""

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        raise NotFoundError("no such round")

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        return RoundOutcome("unknown", durable=True)


def collected(*totals: np.ndarray | Any, opened: bool = False
              ) -> tuple[CombinedRound, list[int]]:
    """The round over workers answering ``totals`` (or stand-in workers), and its total once
    every shard settled; ``opened``: its workers accepted the shards in this process."""
    pool = [SimpleNamespace(control=Worker(total) if isinstance(total, np.ndarray) else total)
            for total in totals]
    finished: list[CombinedRound] = []
    shards = [shard(j) for j in range(len(totals))]
    for s in shards:
        s.opened = opened

    async def scenario() -> tuple[CombinedRound, list[int]]:
        combined = CombinedRound(b"r/1/1", shards,
                                 pool, CombinerLimits(),  # type: ignore[arg-type]
                                 lambda round_, _: finished.append(round_),
                                 lambda _: None, lambda _: None)
        combined.start()
        await asyncio.wait_for(combined.finished.wait(), 20)
        total = [] if combined.total is None else combined.total.tolist()
        combined.stop()
        return combined, total

    return asyncio.run(scenario())


def honest() -> np.ndarray:
    return np.arange(DIMENSION, dtype=np.uint16)


@pytest.mark.parametrize(("lie", "fault"), [
    # Before: the round's task died on a shape error, unseen, and the round ran to its deadline.
    (np.arange(DIMENSION // 2, dtype=np.uint16), "4 entries, its shard's config has 8"),
    # Before: a one-entry sum was broadcast over the whole total and released.
    (np.array([5], dtype=np.uint16), "1 entries, its shard's config has 8"),
    (np.arange(DIMENSION, dtype=np.uint32), "taken modulo 2^32, its shard's config says 2^16"),
])
def test_a_sum_its_shard_config_rules_out_is_refused(lie: np.ndarray, fault: str) -> None:
    combined, total = collected(honest(), lie)
    good, liar = combined.shards
    assert (good.state, liar.state) == (RoundState.RELEASED, RoundState.ABORTED)
    assert liar.reason == f"the worker's sum is malformed: {fault}"
    assert liar.reached_unmask  # charged as a shard lost after unmasking
    assert combined.state == RoundState.RELEASED and combined.contributors == 3
    assert total == honest().tolist()
    # Nobody will fetch the malformed sum: its worker drops it at once (before, it held it for
    # its --result-ttl); the good one is held for the total.
    assert [w.control.told for w in pool_of(combined)] == [[], ["dropped"]]


def pool_of(combined: CombinedRound) -> list[Any]:
    return combined.pool  # type: ignore[return-value]


def test_honest_sums_add_up() -> None:
    combined, total = collected(honest(), honest())
    assert combined.state == RoundState.RELEASED and combined.contributors == 6
    assert total == (2 * honest().astype(np.int64)).tolist()


def test_a_shard_its_journaling_worker_no_longer_knows_counts_as_reached_unmasking() -> None:
    # Worker 1 accepted its shard, then came back with a journal that never heard of it:
    # unmasking may have begun under the lost record. Before, the shard dropped out free.
    combined, total = collected(honest(), ForgetfulWorker(), opened=True)
    good, lost = combined.shards
    assert (good.state, lost.state) == (RoundState.RELEASED, RoundState.ABORTED)
    assert lost.reached_unmask and combined.reached_unmask
    assert "has no record of the shard it accepted" in lost.reason
    assert total == honest().tolist()


class AcceptingForgetfulWorker(ForgetfulWorker):
    async def open_round(self, signed: SignedConfig) -> None:
        return None


def test_a_shard_the_combiner_opened_is_known_accepted_by_its_worker() -> None:
    # The combiner's own open marks the shard accepted, so the forgetful worker's "unknown"
    # after it is not taken as "never opened".
    cohort = make_cohort(4, DIMENSION, 3, 2, n_min=3, consistency_check=True,
                         windows_ms=(600_000,) * 5, round_id=b"r/1/1/s0")
    pool = [SimpleNamespace(control=AcceptingForgetfulWorker())]

    async def scenario() -> CombinedRound:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, pool)  # type: ignore[arg-type]
        round_, _ = await combiner.open(b"r/1/1", [Placement(cohort.signed, 0)])
        await asyncio.wait_for(round_.finished.wait(), 20)
        return round_

    round_ = asyncio.run(scenario())
    assert round_.state == RoundState.ABORTED and round_.reached_unmask


def test_a_shard_taken_over_that_its_journaling_worker_never_heard_of_is_free() -> None:
    # Taken over after a combiner restart, the shard may never have reached its worker (the
    # combiner journals a round before it opens the shards): a journal's "unknown" is its word.
    combined, _ = collected(honest(), ForgetfulWorker(), opened=False)
    assert not combined.shards[1].reached_unmask


class PendingWorker(AcceptingForgetfulWorker):
    """A worker running its shard: GetResult waits (for the round's end, beyond the test)."""

    cancelled = False

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        await asyncio.Event().wait()

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        return RoundOutcome("running", durable=True)

    async def cancel(self, round_id: bytes) -> None:
        self.cancelled = True


class Workers(list[Any]):
    """A combiner's pool of worker stand-ins, worker j at control address wj:1 across
    restarts."""

    def __init__(self, *controls: Any) -> None:
        super().__init__([SimpleNamespace(control=control, index=j,
                                          spec=SimpleNamespace(control_address=f"w{j}:1"))
                          for j, control in enumerate(controls)])
        self.workers = list(self)


COHORT = make_cohort(4, DIMENSION, 3, 2, n_min=3, consistency_check=True,
                     windows_ms=(600_000,) * 5, round_id=b"r/1/1/s0")


async def settled_after_restart(state: Path) -> CombinedRound:
    """The round the combiner on ``state`` takes over, settled by a worker that came back on
    a journal that never heard of its shard."""
    combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(ForgetfulWorker()),  # type: ignore[arg-type]
                                journal=Journal(state))
    try:
        combiner.restore()
        (round_,) = combiner._rounds.values()
        await asyncio.wait_for(round_.finished.wait(), 20)
        return round_
    finally:
        combiner.close()


def test_a_shard_opened_before_a_combiner_restart_then_lost_by_its_worker_is_charged(
        tmp_path: Path) -> None:
    # The combiner opened the round (the shard accepted), stopped, started again (the start
    # rewrites the journal), stopped and started again, and the worker meanwhile came back on
    # a new journal. Before, the taken-over shard never counted as accepted: the worker's
    # durable "unknown" read as "never opened" and the shard dropped out free.
    async def opened_then_restarted() -> None:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(PendingWorker()),  # type: ignore[arg-type]
                                    journal=Journal(tmp_path))
        combiner.restore()
        try:
            await combiner.open(b"r/1/1", [Placement(COHORT.signed, 0)])
        finally:
            combiner.close()
        restarted = CombinerRegistry(COORDINATOR_PUBLIC, Workers(PendingWorker()),  # type: ignore[arg-type]
                                     journal=Journal(tmp_path))
        restarted.restore()
        restarted.close()

    asyncio.run(opened_then_restarted())
    round_ = asyncio.run(settled_after_restart(tmp_path))
    (shard_,) = round_.shards
    assert round_.state == RoundState.ABORTED and shard_.reached_unmask
    assert "has no record of the shard it accepted" in shard_.reason


def test_a_round_journaled_before_its_shards_opened_keeps_the_workers_word(
        tmp_path: Path) -> None:
    # The combiner stopped between the round's record and its shards' opens (so the
    # coordinator never heard that it opened, and no device has a task): the worker's
    # "unknown" may be a shard that never reached it, and the shard drops out free.
    combiner_journal(tmp_path / "state", b"r/1/1", {
        "config": COHORT.signed.payload.hex(), "signature": COHORT.signed.signature.hex(),
        "worker": 0, "address": "w0:1"}, finished=False)
    round_ = asyncio.run(settled_after_restart(tmp_path / "state"))
    assert round_.state == RoundState.ABORTED and not round_.reached_unmask


def test_a_round_whose_shards_opened_unrecorded_is_refused_and_cancelled(
        tmp_path: Path) -> None:
    worker = PendingWorker()

    async def open_on_a_full_disk() -> CombinerRegistry:
        journal = Journal(tmp_path)
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(worker),  # type: ignore[arg-type]
                                    journal=journal)

        async def full(round_id: bytes) -> None:
            raise OSError(28, "No space left on device")

        combiner.restore()
        journal.shards_opened = full  # type: ignore[method-assign]
        try:
            with pytest.raises(StateError, match="cannot record that its shards opened: "
                                                 r"\[Errno 28\] No space left on device"):
                await combiner.open(b"r/1/1", [Placement(COHORT.signed, 0)])
        finally:
            combiner.close()
        return combiner

    combiner = asyncio.run(open_on_a_full_disk())
    assert worker.cancelled and not combiner._rounds
    assert combiner.outcome(b"r/1/1") is not None  # (its tombstone: not reopened as new)


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0)


class HoldingWorker(AcceptingForgetfulWorker):
    """A worker whose shard released ``total``: a sum sent is dropped there as delivered,
    unless GetResult asked to hold it (then kept until a CancelRound, ``told``)."""

    def __init__(self, total: np.ndarray) -> None:
        self.total = total
        self.dropped = False
        self.told: list[str] = []

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        if self.dropped:
            raise StateError("the sum was already delivered")
        self.dropped = not hold
        return SimpleNamespace(total=self.total, survivors=(1, 2, 3), signatures=(),
                               num_contributors=3)

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        return RoundOutcome("released", reached_unmask=True, delivered=self.dropped,
                            durable=True)

    async def cancel(self, round_id: bytes, delivered: bool = False) -> None:
        self.told.append("delivered" if delivered else "dropped")
        self.dropped = True


def test_a_shard_sum_sent_before_a_combiner_restart_is_fetched_again_and_counted_once(
        tmp_path: Path) -> None:
    # Worker 0 sent its shard sum, worker 1 still ran its shard, and the combiner stopped.
    # The restarted combiner takes the round over and fetches worker 0's sum again: it was
    # held there (the combiner tells a worker its sum is delivered only once the coordinator
    # confirmed it has the total). Before, worker 0 had dropped it as sent: the restarted
    # combiner found it "already delivered", and the shard was lost, charged as reached
    # unmasking.
    first, second = HoldingWorker(honest()), HoldingWorker(2 * honest())

    async def sent_then_stopped() -> None:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(first, PendingWorker()),  # type: ignore[arg-type]
                                    journal=Journal(tmp_path))
        combiner.restore()
        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(until(lambda: round_.shards[0].state != RoundState.RUNNING),
                                   20)  # (the combiner took worker 0's sum in)
        finally:
            combiner.close()

    async def restarted() -> tuple[CombinedRound, list[int]]:
        combiner = journaled(tmp_path, first, second)
        try:
            (round_,) = combiner._rounds.values()
            await asyncio.wait_for(round_.finished.wait(), 20)
            total = [] if round_.total is None else round_.total.tolist()
            await fetched_and_confirmed(combiner, first, second)
            return round_, total
        finally:
            combiner.close()

    asyncio.run(sent_then_stopped())
    assert first.told == []  # held: the round never released
    round_, total = asyncio.run(restarted())
    assert [s.state for s in round_.shards] == [RoundState.RELEASED] * 2
    assert round_.contributors == 6
    assert total == (3 * honest().astype(np.int64)).tolist()  # each shard counted once
    assert (first.told, second.told) == (["delivered"], ["delivered"])


COHORTS = [make_cohort(4, DIMENSION, 3, 2, n_min=3, consistency_check=True,
                       windows_ms=(600_000,) * 5, round_id=b"r/1/1/s%d" % j)
           for j in range(2)]


def journaled(state: Path, *controls: Any) -> CombinerRegistry:
    """A combiner over stand-in workers, started on the journal in ``state``."""
    combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(*controls),  # type: ignore[arg-type]
                                journal=Journal(state))
    combiner.restore()
    return combiner


async def opened(combiner: CombinerRegistry) -> CombinedRound:
    round_, _ = await combiner.open(
        b"r/1/1", [Placement(c.signed, j) for j, c in enumerate(COHORTS)])
    return round_


async def settled(combiner: CombinerRegistry) -> None:
    """Every journal write submitted so far done, and what waited for them run on: a word to
    the workers sent at a journal line has been sent (the stand-ins answer at once)."""
    assert combiner.journal is not None
    await asyncio.wrap_future(combiner.journal._worker.submit(lambda: None))
    for _ in range(20):
        await asyncio.sleep(0)


async def fetched_and_confirmed(combiner: CombinerRegistry, *workers: HoldingWorker
                                ) -> list[int]:
    """The coordinator's side: the total read (held), then said delivered; the workers are
    told so only then."""
    sent: list[ResultReport] = []

    async def send(report: ResultReport) -> None:
        sent.append(report)

    control = ShardedRoundControl(combiner)
    await control.get_result(b"r/1/1", 20, send, hold=True)
    (report,) = sent
    assert report.state == RoundState.RELEASED and report.total is not None
    await settled(combiner)
    assert [w.told for w in workers] == [[]] * len(workers)
    await control.cancel(b"r/1/1", delivered=True)
    await asyncio.wait_for(until(lambda: all(w.told for w in workers)), 20)
    return report.total.tolist()


async def released_then_stopped(tmp_path: Path, *workers: HoldingWorker) -> None:
    """The combiner opens the round over ``workers``, collects its total and stops before the
    coordinator fetched it (the round's ``finish`` is on disk)."""
    combiner = journaled(tmp_path, *workers)
    try:
        round_, _ = await combiner.open(
            b"r/1/1", [Placement(c.signed, j) for j, c in enumerate(COHORTS)])
        await asyncio.wait_for(round_.finished.wait(), 20)
    finally:
        combiner.close()  # (finishes the journal's writes)


def test_a_total_released_before_a_combiner_restart_is_fetched_again_and_delivered_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The combiner released the round (its outcome journaled) and stopped before the
    # coordinator read the total. The restarted combiner takes it over and rebuilds the total
    # from the shard sums its workers still hold, each once; they are told delivered only once
    # the coordinator says it has it, and a later start does not take the round over again.
    # Before, the workers were told delivered at the journal's finish line and the restarted
    # combiner's total was lost ("its total was lost in a combiner restart"), charged.
    first, second = HoldingWorker(honest()), HoldingWorker(2 * honest())

    async def restarted() -> list[int]:
        combiner = journaled(tmp_path, first, second)
        try:
            return await fetched_and_confirmed(combiner, first, second)
        finally:
            combiner.close()

    asyncio.run(released_then_stopped(tmp_path, first, second))
    assert (first.told, second.told) == ([], [])
    caplog.clear()
    assert asyncio.run(restarted()) == (3 * honest().astype(np.int64)).tolist()
    assert (first.told, second.told) == (["delivered"], ["delivered"])
    # Its record says unmasking was reached: the takeover does not journal it again (from
    # 97e22abf to 32422a3b it did, before the journal was open: 'could not write the outcome
    # journal: the journal is not open' at every start that took a total over).
    assert "could not write the outcome journal" not in caplog.text

    async def once_more() -> tuple[Any, int]:
        combiner = journaled(tmp_path, first, second)
        try:
            return combiner.outcome(b"r/1/1"), len(combiner)
        finally:
            combiner.close()

    (outcome, _), running = asyncio.run(once_more())
    assert running == 0 and outcome.delivered


def test_a_total_cancelled_unfetched_has_its_shard_sums_dropped_and_stays_dropped(
        tmp_path: Path) -> None:
    # The coordinator cancels a released total it never read: the workers drop their held
    # shard sums at once (before: held for their --result-ttl, or said delivered), and a
    # restarted combiner does not take the round over (the journal's ``dropped``).
    first, second = HoldingWorker(honest()), HoldingWorker(2 * honest())

    async def released_then_cancelled() -> None:
        combiner = journaled(tmp_path, first, second)
        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(round_.finished.wait(), 20)
            assert await ShardedRoundControl(combiner).cancel(b"r/1/1") == RoundState.RELEASED
            await asyncio.wait_for(until(lambda: bool(first.told and second.told)), 20)
        finally:
            combiner.close()

    async def restarted() -> int:
        combiner = journaled(tmp_path, first, second)
        try:
            return len(combiner)
        finally:
            combiner.close()

    asyncio.run(released_then_cancelled())
    assert (first.told, second.told) == (["dropped"], ["dropped"])
    assert asyncio.run(restarted()) == 0


def test_a_cancelled_round_drops_the_shard_sums_its_workers_hold(tmp_path: Path) -> None:
    # Worker 0 released its shard (its sum held for the total), worker 1 still runs its
    # shard, and the coordinator cancels the round: both are cancelled at their workers.
    # Before, only the running shard was: worker 0 held its sum for its --result-ttl.
    first, pending = HoldingWorker(honest()), PendingWorker()

    async def cancelled() -> RoundState:
        combiner = journaled(tmp_path, first, pending)
        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(until(lambda: round_.shards[0].state != RoundState.RUNNING),
                                   20)
            return await combiner.cancel(b"r/1/1")
        finally:
            combiner.close()

    assert asyncio.run(cancelled()) == RoundState.ABORTED
    assert pending.cancelled and first.told == ["dropped"]


def test_a_cancelled_round_gives_its_slot_back_at_its_result_ttl(tmp_path: Path) -> None:
    # The coordinator cancels a running round at its deadline and asks its outcome, never its
    # result: the round is forgotten once its outcome waited result_ttl_s, as an unfetched
    # released one is. Before, the cancel stopped the task that expires it, and the aborted
    # round held one of the combiner's max_rounds until a restart: that many cancels and
    # every open was refused.
    pending = PendingWorker()

    async def cancelled_then_waited() -> None:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(HoldingWorker(honest()), pending),  # type: ignore[arg-type]
                                    CombinerLimits(result_ttl_s=0.01), Journal(tmp_path))
        combiner.restore()
        try:
            await opened(combiner)
            assert await combiner.cancel(b"r/1/1") == RoundState.ABORTED
            await asyncio.wait_for(until(lambda: len(combiner) == 0), 20)
        finally:
            combiner.close()

    asyncio.run(cancelled_then_waited())
    assert pending.cancelled


class RefetchedWorker(HoldingWorker):
    """A holding worker whose GetResult, once ``slow``, waits (for the test's end): a
    restarted combiner's fetch of its held sum still under way."""

    slow = False
    asked = False

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        if self.slow:
            self.asked = True
            await asyncio.Event().wait()
        return await super().result(round_id, wait_s, hold)


@pytest.mark.parametrize(("delivered", "told"), [(True, "delivered"), (False, "dropped")])
def test_a_total_the_coordinator_settles_while_it_is_rebuilt_stays_released(
        tmp_path: Path, delivered: bool, told: str) -> None:
    # The combiner released the round and stopped; the coordinator had read the total (or
    # gave up on it) and says so while the restarted combiner still fetches the shard sums
    # again. Before, the call cancelled the round as a running one: journaled 'aborted,
    # cancelled' (the coordinator had stored its release) and its sums dropped as such.
    first, second = RefetchedWorker(honest()), RefetchedWorker(2 * honest())

    async def settled_while_rebuilt() -> RoundState:
        first.slow = second.slow = True
        combiner = journaled(tmp_path, first, second)
        try:
            await asyncio.wait_for(until(lambda: first.asked and second.asked), 20)
            state = await ShardedRoundControl(combiner).cancel(b"r/1/1", delivered=delivered)
            await asyncio.wait_for(until(lambda: bool(first.told and second.told)), 20)
            return state
        finally:
            combiner.close()

    async def restarted() -> tuple[Any, int]:
        combiner = journaled(tmp_path, first, second)
        try:
            return combiner.outcome(b"r/1/1"), len(combiner)
        finally:
            combiner.close()

    asyncio.run(released_then_stopped(tmp_path, first, second))
    assert asyncio.run(settled_while_rebuilt()) == RoundState.RELEASED
    assert (first.told, second.told) == ([told], [told])
    (outcome, _), running = asyncio.run(restarted())
    assert running == 0  # not taken over again
    assert (outcome.state.value, outcome.delivered, outcome.reached_unmask,
            outcome.num_contributors) == ("released", delivered, True, 6)


class BrokenWorker(HoldingWorker):
    """A worker whose released sum the combiner fails on after adding it into the total (its
    answer lacks the evidence the combiner then reads: a bug's stand-in)."""

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        return SimpleNamespace(total=self.total, num_contributors=3)


def test_a_round_the_combiner_fails_collecting_aborts_at_once_and_releases_nothing() -> None:
    # Shard 0 released, the combiner failed on shard 1's sum after adding it in, shard 2 still
    # runs. Before: the round released shard 0's evidence with a total holding shard 1's sum
    # too, shard 2's collector ran on unseen (a sum it took in later was added after the
    # release), and shard 1's sum stayed held at its worker for its --result-ttl.
    pending = PendingWorker()
    combined, total = collected(HoldingWorker(honest()), BrokenWorker(honest()), pending)
    assert combined.state == RoundState.ABORTED and total == []
    assert combined.abort_reason.startswith("the combiner failed collecting it (shard 1: ")
    assert combined.reached_unmask  # charged as lost after unmasking
    first, broken, _ = pool_of(combined)
    assert (first.control.told, broken.control.told) == (["dropped"], ["dropped"])
    assert pending.cancelled  # (its collector stopped, its shard cancelled at its worker)


async def result_after_restart(state: Path, *workers: HoldingWorker
                               ) -> tuple[CombinedRound, list[ResultReport]]:
    """The round a combiner restarted on ``state`` over ``workers`` takes over, and what the
    coordinator's GetResult of it is sent."""
    combiner = journaled(state, *workers)
    sent: list[ResultReport] = []

    async def send(report: ResultReport) -> None:
        sent.append(report)

    try:
        (round_,) = combiner._rounds.values()
        await ShardedRoundControl(combiner).get_result(b"r/1/1", 20, send, hold=True)
        return round_, sent
    finally:
        combiner.close()


def test_a_total_released_before_a_restart_is_never_rebuilt_short(tmp_path: Path) -> None:
    # The combiner released the round (the coordinator may have read the total and charged it
    # at its 6 contributors) and stopped; worker 1 then lost its held sum (its own restart, or
    # its --result-ttl). Before, the restarted combiner released worker 0's sum alone, 3
    # contributors: a second, other total for an attempt charged once, at 6, and the
    # difference of the two is worker 1's shard sum.
    first, second = HoldingWorker(honest()), HoldingWorker(2 * honest())
    asyncio.run(released_then_stopped(tmp_path, first, second))
    second.dropped = True  # (it answers "already delivered", released)
    round_, (report,) = asyncio.run(result_after_restart(tmp_path, first, second))
    assert report.state == RoundState.ABORTED and report.total is None
    assert report.reached_unmask  # (charged as lost after unmasking, if not charged before)
    assert round_.abort_reason.startswith(
        "its total, released before a restart with 6 contributors, was rebuilt with 3")
    assert first.told == ["dropped"]  # nobody will read worker 0's sum alone


def journal_record(state: Path) -> tuple[int, tuple[int, ...] | None]:
    """The contributors and released shards the journal in ``state`` records of its round."""
    journal = Journal(state)
    try:
        (record,) = journal.load().values()
        return record.contributors, record.released_shards
    finally:
        journal.close()


class GivenUpWorker(HoldingWorker):
    """A worker whose shard released ``total`` and holds it, but which the combiner's first
    life gave up on (``given_up``: the stand-in for a worker unreachable past patience_s,
    left aborted there without a word reaching it)."""

    given_up = True

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        if self.given_up:
            raise RoundAborted("worker unreachable", reached_unmask=True)
        return await super().result(round_id, wait_s, hold)


def test_a_total_released_before_a_restart_is_rebuilt_from_the_same_shards_alone(
        tmp_path: Path) -> None:
    # The combiner released worker 0's sum alone (worker 1 given up on, its sum still held
    # there) and stopped. Worker 0 then lost its held sum, and worker 1 answers again: its
    # sum, of as many contributors (3), stood in for worker 0's. Before, the restarted
    # combiner released it: another total than the one the coordinator may have read and
    # charged, at the same count, the two telling both shard sums.
    first, second = HoldingWorker(honest()), GivenUpWorker(2 * honest())
    asyncio.run(released_then_stopped(tmp_path, first, second))
    assert journal_record(tmp_path) == (3, (0,))
    first.dropped, second.given_up = True, False
    round_, (report,) = asyncio.run(result_after_restart(tmp_path, first, second))
    assert report.state == RoundState.ABORTED and report.total is None
    assert round_.shards[1].reason == "its sum was not in the total released before a restart"
    assert second.told == ["dropped"]  # (never fetched, held all the same: the restart)


class EarlyAbortedWorker(HoldingWorker):
    """A worker whose shard aborted before unmasking (too few of its devices in time)."""

    async def result(self, round_id: bytes, wait_s: float, hold: bool = False) -> Any:
        raise RoundAborted("too_few_devices", reached_unmask=False)

    async def outcome(self, round_id: bytes) -> RoundOutcome:
        return RoundOutcome("aborted", reached_unmask=False, abort_reason="too_few_devices",
                            durable=True)


@pytest.mark.parametrize(("other", "reached_unmask"), [
    (EarlyAbortedWorker, False), (GivenUpWorker, True)])
def test_a_total_rebuilt_after_a_restart_says_what_its_other_shards_said_at_the_release(
        tmp_path: Path, other: type[HoldingWorker], reached_unmask: bool) -> None:
    # The coordinator charges a total at its proven count, or at n_min where a shard outside
    # it reached unmasking, and refuses a resumed total whose charge is not the one recorded
    # before its restart. Before, the restarted combiner said every shard outside the total
    # reached unmasking, also one that aborted before it: the same total, rebuilt whole, was
    # charged otherwise and refused unread, its attempt lost and its round run again.
    first = HoldingWorker(honest())
    asyncio.run(released_then_stopped(tmp_path, first, other(2 * honest())))
    _, (report,) = asyncio.run(result_after_restart(tmp_path, first, other(2 * honest())))
    assert report.state == RoundState.RELEASED and report.total is not None
    assert [(s.state, s.reached_unmask) for s in report.shards] == [
        (RoundState.RELEASED, True), (RoundState.ABORTED, reached_unmask)]


class FinishHeldJournal(Journal):
    """A journal whose ``finish`` lines wait for ``written`` (a slow disk), or fail (``full``)."""

    def __init__(self, directory: Path, *, full: bool = False) -> None:
        super().__init__(directory)
        self.written = threading.Event()
        self.full = full

    def _write(self, data: bytes) -> None:
        if b'"op":"finish"' in data:
            if self.full:
                raise OSError(28, "No space left on device")
            self.written.wait()
        super()._write(data)


def test_a_release_is_seen_only_once_its_finish_is_on_disk(tmp_path: Path) -> None:
    # Before, the total could be read (and the round was RELEASED to GetOutcome) while its
    # finish line was being written: a combiner killed then took the round over as running,
    # not as released, and rebuilt its total without the check that it is the same one.
    first, second = HoldingWorker(honest()), HoldingWorker(2 * honest())
    journal = FinishHeldJournal(tmp_path)

    async def released() -> tuple[list[ResultReport], RoundState]:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(first, second),  # type: ignore[arg-type]
                                    journal=journal)
        combiner.restore()
        sent: list[ResultReport] = []

        async def send(report: ResultReport) -> None:
            sent.append(report)

        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(until(lambda: all(
                s.state == RoundState.RELEASED for s in round_.shards)), 20)
            for _ in range(20):
                await asyncio.sleep(0)
            control = ShardedRoundControl(combiner)
            await control.get_result(b"r/1/1", 0, send, hold=True)
            seen = (await control.outcome(b"r/1/1")).state
            journal.written.set()
            await asyncio.wait_for(round_.finished.wait(), 20)
            await control.get_result(b"r/1/1", 0, send, hold=True)
            return sent, RoundState(seen.value)
        finally:
            journal.written.set()
            combiner.close()

    (before, after), seen = asyncio.run(released())
    assert (before.state, before.total, seen) == (RoundState.RUNNING, None, RoundState.RUNNING)
    assert after.state == RoundState.RELEASED and after.total is not None


def test_a_release_whose_finish_cannot_be_written_aborts(tmp_path: Path) -> None:
    first, second = HoldingWorker(honest()), HoldingWorker(2 * honest())

    async def released_on_a_full_disk() -> CombinedRound:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, Workers(first, second),  # type: ignore[arg-type]
                                    journal=FinishHeldJournal(tmp_path, full=True))
        combiner.restore()
        try:
            round_ = await opened(combiner)
            await asyncio.wait_for(round_.finished.wait(), 20)
            return round_
        finally:
            combiner.close()

    round_ = asyncio.run(released_on_a_full_disk())
    assert round_.state == RoundState.ABORTED and round_.reached_unmask
    assert round_.abort_reason == ("the combiner cannot record its release: [Errno 28] No "
                                   "space left on device")
    assert (first.told, second.told) == (["dropped"], ["dropped"])
