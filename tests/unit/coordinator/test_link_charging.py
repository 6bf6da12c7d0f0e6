"""The coordinator's network link and the ledger: the documented shard-failure rule of sharded
rounds (docs/scaling.md, fedhh.secagg.shards) applied by the real round driver, network link and
store to what a combiner reports; the ledger charged exactly once per attempt, whatever the
combiner does and across a coordinator restart; an aggregation service that stops answering
for a while (starved past a call's timeout) waited for while it still runs the round; and one
that does not answer before an attempt (stopped, restarting) waited for, no device drawn,
charged or sent a task meanwhile, no attempt spent, until a bounded patience runs out.

The combiner is a fake speaking the link's ``AggregatorApi`` protocol (both services); the
devices are check-ins at the real lobby, and the evidence of each released shard is signed with
their identity keys over the shard the coordinator actually signed for them (from the tasks
they received), as real devices sign it in the consistency check.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.config import RunConfig
from fedhh.errors import FedhhError, RoundAborted
from fedhh.rounds import RunCancelled
from fedhh.secagg import ReleaseEvidence, RoundConfig
from fedhh.secagg.config import SignedConfig, session_id_of
from fedhh.secagg.messages import consistency_transcript, survivors_digest
from fedhh.secagg.primitives import ed25519_from_seed, ed25519_public_bytes
from fedhh.secagg.shards import ShardRelease
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.aggregation import (
    AggregatorOutcome,
    AggregatorRefused,
    AggregatorUnavailable,
    DeviceAddresses,
)
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.link import run_tag
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import CHARGED_OVER, Store

SHARD = 8
DEVICES = 3 * SHARD
N_MIN = 5
WORKERS = [(w, DeviceAddresses(f"worker-{w}:7101", f"https://worker-{w}:7181")) for w in range(3)]


def config(**overrides: Any) -> RunConfig:
    values: dict[str, Any] = dict(
        eps_agg=1e6, delta=1e-6, eps_local=4.0, rounds=1, max_bits=10, dim_limit=1 << 10,
        codec="5bit", target_devices=DEVICES, min_devices=N_MIN, shard_size=SHARD,
        checkin_ms=20_000, checkin_quiet_ms=50, oversubscription=1.0, stage_ms=20_000,
        max_attempts=3, expected_dropout=0.0, corrupt_fraction=0.0)  # (k, t) exist for n = 8
    values.update(overrides)
    return RunConfig(**values)


@dataclass
class Shard:
    config: RoundConfig
    worker: int


@dataclass
class Plan:
    """Scripts what the fake combiner does with each attempt (by attempt number)."""

    # per shard: "released", "released-short" (proves fewer than n_min), "released-unsigned"
    # (proves nobody), "aborted" (before unmasking) or "lost" (aborted after unmasking began)
    shards: Callable[[int], list[str]]
    # after the coordinator's hook accepted the evidence: "deliver", "unreachable" (the
    # combiner is lost while the total is read) or "hang" (the coordinator dies meanwhile)
    after_hook: Callable[[int], str] = lambda attempt: "deliver"
    # how many result calls fail as unreachable before the evidence is sent (the service is
    # starved or restarting, and still runs the round)
    silent_calls: int = 0
    # what the service says of a round once it stops being silent: None, it aborted after
    # unmasking ("gone"); a number, the same with that many contributors claimed (unverified)
    claimed: int | None = None


@dataclass
class FakeCombiner:
    """A combiner (and its workers) as ``NetworkLink`` sees it; every call recorded."""

    plan: Plan
    devices: dict[int, Ed25519PrivateKey]
    tasks: dict[bytes, dict[int, int]] = field(default_factory=dict)  # config -> id -> device
    addressed: dict[bytes, DeviceAddresses] = field(default_factory=dict)  # where, by config
    opened: list[tuple[bytes, list[Shard]]] = field(default_factory=list)
    cancelled: list[bytes] = field(default_factory=list)
    hook_done: asyncio.Event = field(default_factory=asyncio.Event)
    holds_sum: bool = False
    sharded: bool = True  # False: a single aggregator (unsharded rounds)
    calls: int = 0
    hang: asyncio.Event = field(default_factory=asyncio.Event)
    task_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    address: str = "control.example:7100"  # where the coordinator reaches the service
    # An outage: the first ``down_for`` calls of workers(), and the first ``open_fails``
    # openings, find the service unreachable; ``on_down()`` runs at each.
    down_for: int = 0
    open_fails: int = 0
    silent_outcomes: int = 0  # outcome() calls (from any caller) that find it unreachable
    no_workers_for: int = 0  # workers() calls, after those of down_for, that list none
    refuses: bool = False  # workers() refuses the coordinator (not its control token)
    on_down: Callable[[], None] = lambda: None
    workers_asked: int = 0
    # Back without its journal (a new --state-dir, a lost volume): it knows no round, and
    # says so as a journaling service does ("never").
    forgets: bool = False
    stalls: bool = False  # result calls wait (on ``hang``) before anything is released
    # Rounds whose held sum the coordinator said stored (``delivered``), and what its store
    # held of the attempt then; ``delivering`` (if set) runs first, as the call's wait.
    delivered: list[bytes] = field(default_factory=list)
    delivered_seen: list[list[tuple[int, str, int]]] = field(default_factory=list)
    store: Store | None = None
    delivering: Callable[[], Awaitable[None]] | None = None

    async def workers(self) -> list[tuple[int, DeviceAddresses]] | None:
        self.workers_asked += 1
        if self.refuses:
            raise AggregatorRefused("the aggregation service refused DescribeWorkers "
                                    "(INTERNAL: a bug); the service's log says why")
        if self.workers_asked <= self.down_for:
            self.on_down()
            raise AggregatorUnavailable("aggregation service unreachable (UNAVAILABLE)")
        if self.workers_asked <= self.down_for + self.no_workers_for:
            self.on_down()
            return []
        return WORKERS if self.sharded else None

    def _open_fails(self) -> bool:
        if self.open_fails > 0:
            self.open_fails -= 1
            self.on_down()
            return True
        return False

    @property
    def combiner(self) -> _ShardCombiner:
        return _ShardCombiner(self)

    @property
    def single(self) -> _SingleAggregator:
        return _SingleAggregator(self)

    async def open_sharded(self, round_id: bytes, shards: list[tuple[SignedConfig, int]]
                           ) -> None:
        if self._open_fails():
            raise AggregatorUnavailable("combiner unreachable (UNAVAILABLE)")
        self.opened.append((round_id, [Shard(RoundConfig.from_bytes(s.payload), w)
                                       for s, w in shards]))

    def _shards_of(self, round_id: bytes) -> list[Shard]:
        return next(shards for rid, shards in self.opened if rid == round_id)

    def took_task(self, task: pb.Task) -> None:
        self.tasks.setdefault(bytes(task.round_config), {})[task.secagg_id] = task.device_id
        self.addressed[bytes(task.round_config)] = DeviceAddresses(task.aggregator_address,
                                                                   task.aggregator_web_url)
        self.task_arrived.set()

    async def _devices_have_tasks(self, shards: list[Shard]) -> None:
        while any(len(self.tasks.get(s.config.to_bytes(), {})) < s.config.num_devices
                  for s in shards):
            self.task_arrived.clear()
            await self.task_arrived.wait()

    def _evidence(self, shard: Shard, signers: int | None = None) -> ReleaseEvidence:
        ids = tuple(range(1, shard.config.num_devices + 1))
        by_id = self.tasks[shard.config.to_bytes()]
        digest, session = survivors_digest(ids), session_id_of(shard.config)
        signatures = tuple(
            (i, self.devices[by_id[i]].sign(consistency_transcript(session, i, digest)))
            for i in ids[:signers])
        return ReleaseEvidence(ids, signatures, len(ids))

    def _release(self, shard: Shard, fate: str) -> ShardRelease:
        rid = shard.config.round_id
        if fate == "released":
            return ShardRelease(rid, True, True, self._evidence(shard))
        if fate == "released-short":
            return ShardRelease(rid, True, True, self._evidence(shard, N_MIN - 1))
        if fate == "released-unsigned":
            return ShardRelease(rid, True, True, self._evidence(shard, 0))
        return ShardRelease(rid, False, fate == "lost", None, fate)

    async def sharded_result(self, round_id: bytes, dimension: int, timeout_s: float,
                             on_release: Callable[[list[ShardRelease]], Awaitable[None]]
                             ) -> tuple[np.ndarray, int]:
        if self.stalls:
            await self.hang.wait()
        shards = self._shards_of(round_id)
        # (the round's own dimension is asked for, by a successor process too: it checks the
        # released header against it)
        assert {s.config.dimension for s in shards} == {dimension}
        await self._devices_have_tasks(shards)
        self.calls += 1
        if self.calls <= self.plan.silent_calls:
            raise AggregatorUnavailable("DEADLINE_EXCEEDED")
        attempt = int(round_id.decode().split("/")[2])  # run/round/attempt[/s<shard>]
        fates = self.plan.shards(attempt)
        if not any(f.startswith("released") for f in fates):
            raise RoundAborted("the combiner aborted the round: no shard released",
                               reached_unmask="lost" in fates)
        releases = [self._release(s, f) for s, f in zip(shards, fates, strict=True)]
        await on_release(releases)
        self.hook_done.set()
        after = self.plan.after_hook(attempt)
        if after == "unreachable":
            raise AggregatorUnavailable("UNAVAILABLE")
        if after == "hang":
            await self.hang.wait()
        released = [s for s, f in zip(shards, fates, strict=True) if f == "released"]
        total = np.zeros(shards[0].config.dimension, dtype=np.int64)
        return total, sum(s.config.num_devices for s in released)

    async def outcome(self, round_id: bytes) -> AggregatorOutcome:
        if self.silent_outcomes > 0:
            self.silent_outcomes -= 1
            self.on_down()
            raise AggregatorUnavailable("UNAVAILABLE")
        if self.forgets:
            return AggregatorOutcome("never", reason="the combiner journals its rounds and has "
                                     "no record of it")
        if self.holds_sum:  # (until the coordinator cancels it, or says its release stored)
            return AggregatorOutcome("released", True, round_id not in self.cancelled
                                     and round_id not in self.delivered)
        if self.calls <= self.plan.silent_calls and self.plan.claimed is None:
            return AggregatorOutcome("running", stage="SHARE_KEYS")
        return AggregatorOutcome("aborted", reached_unmask=True, reason="gone",
                                 contributors=self.plan.claimed)

    async def cancel(self, round_id: bytes) -> None:
        self.cancelled.append(round_id)

    async def deliver(self, round_id: bytes) -> None:
        if self.delivering is not None:
            await self.delivering()
        if self.store is not None:
            self.delivered_seen.append(attempts(self.store, "run"))
        self.delivered.append(round_id)

    async def open_single(self, signed: SignedConfig) -> None:
        assert not self.sharded, "a sharded run never opens an unsharded round"
        config = RoundConfig.from_bytes(signed.payload)
        self.opened.append((config.round_id, [Shard(config, 0)]))

    async def single_result(self, round_id: bytes, dimension: int, timeout_s: float,
                            on_release: Callable[[ReleaseEvidence], Awaitable[None]]
                            ) -> tuple[np.ndarray, int]:
        assert not self.sharded, "a sharded run never asks for an unsharded result"

        async def one(releases: list[ShardRelease]) -> None:
            assert releases[0].evidence is not None
            await on_release(releases[0].evidence)

        return await self.sharded_result(round_id, dimension, timeout_s, one)


@dataclass
class _Face:
    """What both of the fake's service faces answer alike."""

    fake: FakeCombiner

    async def outcome(self, round_id: bytes) -> AggregatorOutcome:
        return await self.fake.outcome(round_id)

    async def watch(self, round_id: bytes, seen: AggregatorOutcome | None, wait_s: float
                    ) -> AggregatorOutcome:
        return await self.fake.outcome(round_id)  # (at once, as a service before the long-poll)

    async def cancel(self, round_id: bytes) -> None:
        await self.fake.cancel(round_id)

    async def drop(self, round_id: bytes) -> None:
        await self.fake.cancel(round_id)

    async def delivered(self, round_id: bytes) -> None:
        await self.fake.deliver(round_id)


class _ShardCombiner(_Face):
    """The fake's combiner face (``ShardCombiner``)."""

    async def open_round(self, round_id: bytes, shards: list[tuple[SignedConfig, int]]
                         ) -> None:
        await self.fake.open_sharded(round_id, shards)

    async def result(self, round_id: bytes, dimension: int, timeout_s: float,
                     on_release: Callable[[list[ShardRelease]], Awaitable[None]]
                     ) -> tuple[np.ndarray, int]:
        return await self.fake.sharded_result(round_id, dimension, timeout_s, on_release)


class _SingleAggregator(_Face):
    """The fake's single-aggregator face (``SingleAggregator``)."""

    async def open_round(self, signed: SignedConfig) -> None:
        await self.fake.open_single(signed)

    async def result(self, round_id: bytes, dimension: int, timeout_s: float,
                     on_release: Callable[[ReleaseEvidence], Awaitable[None]]
                     ) -> tuple[np.ndarray, int]:
        return await self.fake.single_result(round_id, dimension, timeout_s, on_release)


class Fleet:
    """``size`` enrolled devices (as many as a round admits: a refused check-in would only poll
    again) that check in at the lobby, round after round, and report which shard config and id
    each task gave them."""

    def __init__(self, store: Store, size: int = DEVICES) -> None:
        self.keys = {}
        for i in range(size):
            private = ed25519_from_seed(hashlib.sha256(b"device %d" % i).digest())
            device_id = store.add_device(hashlib.sha256(b"cred %d" % i).digest(),
                                         ed25519_public_bytes(private), f"d{i}")
            self.keys[device_id] = private

    async def serve(self, lobby: Lobby, combiner: FakeCombiner) -> None:
        await asyncio.gather(*(self._device(d, lobby, combiner) for d in self.keys))

    @staticmethod
    async def _device(device_id: int, lobby: Lobby, combiner: FakeCombiner) -> None:
        known, turn = b"", 0
        while True:
            turn += 1
            round_keys = (hashlib.sha256(b"c %d %d" % (device_id, turn)).digest(),
                          hashlib.sha256(b"s %d %d" % (device_id, turn)).digest())
            signed = await lobby.wait_for_task(device_id, round_keys, 5.0, known)
            if signed is None:
                continue
            known = hashlib.sha256(signed.task).digest()
            combiner.took_task(pb.Task.FromString(signed.task))


class Coordinator:
    """The runner over a store, a lobby, a fleet and a fake combiner."""

    def __init__(self, store: Store, fleet: Fleet, combiner: FakeCombiner) -> None:
        self.store, self.combiner = store, combiner
        self.lobby = Lobby()
        self.runner = Runner(store, combiner, Ed25519PrivateKey.generate(),
                             DeviceAddresses("combiner:7200", "https://combiner:7280"),
                             self.lobby, LifetimeBudget(eps=1e9, delta=0.5))
        self.runner.retry_delay_s = 0.0
        self.fleet = fleet

    async def drive(self, run_id: str) -> None:
        devices = asyncio.create_task(self.fleet.serve(self.lobby, self.combiner))
        try:
            await self.runner.drive(run_id)
        finally:
            devices.cancel()


def spends(store: Store, run_id: str) -> list[tuple[int, int, int]]:
    """(round index, attempt, contributors) of every charge in the run's ledger."""
    return [(s["round_index"], s["attempt"], s["contributors"])
            for s in store.run(run_id).ledger["spends"]]


def attempts(store: Store, run_id: str) -> list[tuple[int, str, int]]:
    return [(r.attempt, r.state, r.participants) for r in store.rounds(run_id)]


def scenario(tmp_path: Path, plan: Plan, sharded: bool = True, **overrides: Any
             ) -> tuple[Store, FakeCombiner]:
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, overrides.get("target_devices", DEVICES))
    combiner = FakeCombiner(plan, fleet.keys, sharded=sharded)

    async def go() -> None:
        await create_run(store, config(**overrides), "run")
        await asyncio.wait_for(Coordinator(store, fleet, combiner).drive("run"), 60)

    asyncio.run(go())
    return store, combiner


def every(fate: str) -> Callable[[int], list[str]]:
    return lambda attempt: [fate] * 3


def test_every_shard_released_one_charge_at_the_round_total(tmp_path: Path) -> None:
    store, combiner = scenario(tmp_path, Plan(every("released")))
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    # Three shards of 8 (ids 1..8 each), one per worker, one signed config each.
    (_, shards), = combiner.opened
    assert [s.config.num_devices for s in shards] == [SHARD] * 3
    assert [s.worker for s in shards] == [0, 1, 2]
    assert all(s.config.n_min == N_MIN for s in shards)
    # Each shard's tasks name its worker, by gRPC address and by Connect URL (browsers).
    assert [combiner.addressed[s.config.to_bytes()] for s in shards] == [a for _, a in WORKERS]


def test_an_unsharded_round_names_the_aggregator_for_grpc_and_web_devices(
        tmp_path: Path) -> None:
    _, combiner = scenario(tmp_path, Plan(lambda a: ["released"]), sharded=False,
                           shard_size=None, target_devices=SHARD)
    assert list(combiner.addressed.values()) == [
        DeviceAddresses("combiner:7200", "https://combiner:7280")]


def test_a_shard_aborted_before_unmasking_drops_out_at_no_cost(tmp_path: Path) -> None:
    store, _ = scenario(tmp_path, Plan(lambda a: ["released", "aborted", "released"]))
    assert attempts(store, "run") == [(1, "released", 2 * SHARD)]
    assert spends(store, "run") == [(0, 1, 2 * SHARD)]


def test_a_shard_lost_after_unmasking_charges_the_round_once_at_n_min(tmp_path: Path) -> None:
    store, _ = scenario(tmp_path, Plan(lambda a: ["lost", "released", "released"]))
    # The total over the two released shards is read (the estimator's n is 16); the charge
    # is at n_min, as if the lost shard's devices had been in a round of n_min.
    assert attempts(store, "run") == [(1, "released", N_MIN)]
    assert spends(store, "run") == [(0, 1, N_MIN)]


def test_a_shard_proving_too_few_refuses_the_total_charges_once_and_retries(
        tmp_path: Path) -> None:
    plan = Plan(lambda a: ["released", "released-short", "released"] if a == 1
                else ["released"] * 3)
    store, combiner = scenario(tmp_path, plan)
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    # Attempt 1's total exists and was dropped unread (cancelled at the combiner): charged
    # once, at n_min (no honest device unmasks for fewer); attempt 2 is charged too.
    assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, DEVICES)]
    assert combiner.cancelled == [combiner.opened[0][0]]


@pytest.mark.parametrize("fate", ["released-short", "released-unsigned"])
@pytest.mark.parametrize("sharded", [True, False])
def test_bad_release_evidence_is_charged_at_n_min_not_at_what_it_proves(
        tmp_path: Path, sharded: bool, fate: str) -> None:
    """Issue 28: a release whose evidence proves fewer than n_min (here n_min - 1, or nobody)
    was charged at the proven count, at least two: one lying release charged a sum of two
    devices and could burn the run's budget. A device unmasks only for at least n_min signed
    survivors, so the refused sum, if it exists, is over n_min or more: it is charged at
    n_min, and the round retried."""
    plan = Plan(lambda a: [fate if a == 1 else "released"] * (3 if sharded else 1))
    overrides = {} if sharded else {"shard_size": None, "target_devices": SHARD}
    store, combiner = scenario(tmp_path, plan, sharded=sharded, **overrides)
    n = DEVICES if sharded else SHARD
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, n)]
    assert combiner.cancelled[:1] == [combiner.opened[0][0]]


@pytest.mark.parametrize("sharded", [True, False])
def test_a_lost_attempt_is_charged_at_n_min_whatever_the_service_claims(
        tmp_path: Path, sharded: bool) -> None:
    """Issue 28: an attempt settled as lost (the service stops answering, then says it aborted
    after unmasking began) was charged at the service's own count of contributors: a lying
    service that claims 10^6 shrank the charge of a sum that exists. Nothing proves a count
    then, so it is charged at n_min."""
    plan = Plan(every("released") if sharded else lambda a: ["released"], silent_calls=1,
                claimed=10**6)
    overrides = {} if sharded else {"shard_size": None, "target_devices": SHARD}
    store, _ = scenario(tmp_path, plan, sharded=sharded, **overrides)
    n = DEVICES if sharded else SHARD
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, n)]


def test_no_shard_released_after_unmasking_began_charges_n_min_once(tmp_path: Path) -> None:
    plan = Plan(lambda a: ["lost", "aborted", "lost"] if a == 1 else ["released"] * 3)
    store, _ = scenario(tmp_path, plan)
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, DEVICES)]


def test_no_shard_released_before_unmasking_costs_nothing(tmp_path: Path) -> None:
    plan = Plan(lambda a: ["aborted"] * 3 if a == 1 else ["released"] * 3)
    store, _ = scenario(tmp_path, plan)
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "aborted"), (2, "released")]
    assert spends(store, "run") == [(0, 2, DEVICES)]


def test_a_combiner_lost_while_the_total_is_read_leaves_one_charge_per_attempt(
        tmp_path: Path) -> None:
    """The evidence was accepted and charged; the total never arrived. The attempt is lost,
    charged once (not again when it is settled), and the round retried."""
    plan = Plan(every("released"), after_hook=lambda a: "unreachable" if a == 1 else "deliver")
    store, _ = scenario(tmp_path, plan)
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    assert spends(store, "run") == [(0, 1, DEVICES), (0, 2, DEVICES)]
    assert store.run("run").state != "failed"


def dies_at(store: Store, fleet: Fleet, combiner: FakeCombiner, moment: asyncio.Event
            ) -> None:
    """A coordinator process that runs the run ("run", new) until ``moment``, and dies."""
    async def life() -> None:
        await create_run(store, config(), "run")
        coordinator = asyncio.create_task(Coordinator(store, fleet, combiner).drive("run"))
        await asyncio.wait_for(moment.wait(), 60)
        coordinator.cancel()
        with pytest.raises(asyncio.CancelledError):
            await coordinator

    asyncio.run(life())


def next_process(store: Store, fleet: Fleet, combiner: FakeCombiner,
                 plan: Plan | None = None) -> FakeCombiner:
    """The next coordinator process's drive of the run, at the combiner as ``combiner`` left
    it, still holding the total (``plan``'s, if given); that combiner."""
    successor = FakeCombiner(plan or Plan(every("released")), fleet.keys,
                             tasks=combiner.tasks, opened=combiner.opened, holds_sum=True)

    async def life() -> None:
        await asyncio.wait_for(Coordinator(store, fleet, successor).drive("run"), 60)

    asyncio.run(life())
    return successor


def test_a_coordinator_restarted_after_the_charge_collects_without_charging_again(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released"), after_hook=lambda a: "hang"), fleet.keys)
    dies_at(store, fleet, combiner, combiner.hook_done)  # charged, its total unread
    assert attempts(store, "run") == [(1, "releasing", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]

    # The combiner still holds the total: the next process settles the attempt by reading it.
    next_process(store, fleet, combiner)
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert store.run("run").state == "done"


@pytest.mark.parametrize("held", ["the same shards", "other shards"])
def test_a_restart_reads_the_held_total_only_over_the_shards_charged(
        held: str, tmp_path: Path) -> None:
    """The coordinator dies after charging a total over shards 0 and 1 (shard 2 lost outside
    it: charged n_min). After the restart the combiner holds a total of the same charge, over
    the same shards (read, under the one charge) or over shards 0 and 2 (a total rebuilt from
    other shards: its spend was never recorded, so it is refused unread and dropped, the
    attempt lost at its one charge and the round run again). Before, the count alone was
    compared after a restart and the other total was read under the first's charge."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    charged = ["released", "released", "lost"]
    combiner = FakeCombiner(Plan(lambda a: charged, after_hook=lambda a: "hang"), fleet.keys)
    dies_at(store, fleet, combiner, combiner.hook_done)
    assert attempts(store, "run") == [(1, "releasing", N_MIN)]
    rebuilt = charged if held == "the same shards" else ["released", "lost", "released"]
    successor = next_process(store, fleet, combiner, Plan(
        lambda a: rebuilt if a == 1 else ["released"] * 3))
    if held == "the same shards":
        assert attempts(store, "run") == [(1, "released", N_MIN)]
        assert spends(store, "run") == [(0, 1, N_MIN)]
    else:
        assert attempts(store, "run") == [(1, "lost", N_MIN), (2, "released", DEVICES)]
        reason = store.rounds("run")[0].reason
        assert "over other reports than the one charged" in reason, reason
        assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, DEVICES)]
        assert successor.cancelled[0] == combiner.opened[0][0]  # dropped unread
    assert store.run("run").state == "done"


def test_a_charge_stored_without_whose_reports_refuses_the_held_total(tmp_path: Path) -> None:
    """A store written by a version that did not keep whose reports a charge was over: the
    total held after the restart, of the charged count, cannot be told from another total
    of that count, so it is refused unread, the attempt lost at its one charge and the round
    run again (charged again, rather than a total read that may never have been charged)."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released"), after_hook=lambda a: "hang"), fleet.keys)
    dies_at(store, fleet, combiner, combiner.hook_done)
    with store._tx() as db:  # (the summary as the earlier version left it)
        row = db.execute("SELECT summary FROM rounds").fetchone()
        summary = json.loads(row[0])
        assert summary.pop(CHARGED_OVER).startswith("sha256:")
        db.execute("UPDATE rounds SET summary = ?", (json.dumps(summary),))
    next_process(store, fleet, combiner)
    assert attempts(store, "run") == [(1, "lost", DEVICES), (2, "released", DEVICES)]
    assert "by a version that did not store" in store.rounds("run")[0].reason
    assert spends(store, "run") == [(0, 1, DEVICES), (0, 2, DEVICES)]


@pytest.mark.parametrize("sharded", [True, False])
def test_a_service_silent_for_a_while_is_waited_for_while_it_still_runs_the_round(
        tmp_path: Path, sharded: bool) -> None:
    """Two result calls time out (a starved aggregator or combiner), but the service still runs
    the round: the attempt goes on and releases, charged once; it is not given up and charged
    at n_min."""
    plan = Plan(every("released") if sharded else lambda a: ["released"], silent_calls=2)
    overrides = {} if sharded else {"shard_size": None, "target_devices": SHARD}
    store, combiner = scenario(tmp_path, plan, sharded=sharded, **overrides)
    n = DEVICES if sharded else SHARD
    assert attempts(store, "run") == [(1, "released", n)]
    assert spends(store, "run") == [(0, 1, n)]
    assert combiner.calls == 3


# ---- an aggregation service that does not answer before an attempt ------------------------------
def outage(tmp_path: Path, combiner_setup: Callable[[FakeCombiner, Coordinator, Store], None],
           patience_s: float = 60.0, **overrides: Any
           ) -> tuple[Store, FakeCombiner, BaseException | None]:
    """A run whose service is set up for an outage by ``combiner_setup``; what it raised."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, overrides.get("target_devices", DEVICES))
    combiner = FakeCombiner(Plan(every("released")), fleet.keys)
    raised: list[BaseException] = []

    async def go() -> None:
        await create_run(store, config(**overrides), "run")
        coordinator = Coordinator(store, fleet, combiner)
        coordinator.runner.aggregator_poll_s = 0.001  # polls, not a timing assumption
        coordinator.runner.aggregator_patience_s = patience_s
        combiner_setup(combiner, coordinator, store)
        try:
            await asyncio.wait_for(coordinator.drive("run"), 60)
        except (FedhhError, RunCancelled) as error:
            raised.append(error)

    asyncio.run(go())
    return store, combiner, raised[0] if raised else None


def test_a_service_down_before_an_attempt_is_waited_for_and_spends_no_attempt(
        tmp_path: Path) -> None:
    """The service does not answer for six polls (a restart): the attempt waits, its
    progress naming the address, with no device drawn, charged or tasked and nothing opened;
    then it runs and releases. Before, each poll was an aborted attempt: the run's three
    attempts were spent and it failed."""
    seen: list[tuple[str, int, int, int]] = []

    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        def on_down() -> None:
            progress = coordinator.runner.progress_of("run")
            seen.append((progress.phase if progress else "", len(combiner.opened),
                         len(combiner.tasks), len(store.device_spends(0.0))))
        combiner.down_for, combiner.on_down = 6, on_down

    store, combiner, raised = outage(tmp_path, setup)
    assert raised is None, raised
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert combiner.workers_asked == 7
    # (the first poll precedes the wait's progress; nothing drawn, opened or charged at any)
    assert seen[1:] == [("waiting for the aggregator at control.example:7100", 0, 0, 0)] * 5
    assert seen[0][1:] == (0, 0, 0)
    # The attempt's steps show the wait, for the operator.
    steps = [name for name, _ in store.rounds("run")[0].summary["steps"]]
    assert steps[:2] == ["waiting for the aggregator at control.example:7100", "check-in"]


def test_an_outage_past_the_patience_fails_the_run_naming_the_service_and_its_length(
        tmp_path: Path) -> None:
    """A service that never answers: the first attempt waits out the patience, the later
    ones of the same outage give up at once; the run fails naming the address and how long
    the service was silent; nothing was charged, to the run or to any device."""
    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        combiner.down_for = 10**9

    store, combiner, raised = outage(tmp_path, setup, patience_s=0.05)
    assert isinstance(raised, FedhhError)
    assert "released nothing in 3 attempts" in str(raised)
    assert "the aggregation service at control.example:7100 has not answered for" in str(raised)
    assert "waits up to 0.05 s" in str(raised)
    assert [state for _, state, _ in attempts(store, "run")] == ["aborted"] * 3
    assert spends(store, "run") == [] and store.device_spends(0.0) == {}
    assert combiner.opened == [] and combiner.tasks == {}


def test_a_run_cancelled_while_it_waits_for_the_service_stops_at_no_cost(
        tmp_path: Path) -> None:
    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        combiner.down_for = 10**9
        combiner.on_down = lambda: coordinator.runner.cancel("run")

    store, _, raised = outage(tmp_path, setup)
    assert isinstance(raised, RunCancelled)
    (attempt, state, _), = attempts(store, "run")
    assert (attempt, state) == (1, "aborted")
    assert "cancelled while waiting for the aggregation service at control.example:7100" in \
        store.rounds("run")[0].reason
    assert spends(store, "run") == [] and store.device_spends(0.0) == {}


def test_devices_are_charged_only_once_their_round_opened(tmp_path: Path) -> None:
    """The service is lost between the check-in and the opening: the attempt aborts free,
    and no device was charged its lifetime budget for it (before, the cohort was charged
    before the opening); the next attempt opens, charges and releases."""
    charged_at_failure: list[int] = []

    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        combiner.open_fails = 1
        combiner.on_down = lambda: charged_at_failure.append(len(store.device_spends(0.0)))

    store, _, raised = outage(tmp_path, setup)
    assert raised is None, raised
    assert charged_at_failure == [0]
    assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "aborted"), (2, "released")]
    assert "at control.example:7100 stopped answering before the round opened" in \
        store.rounds("run")[0].reason
    assert spends(store, "run") == [(0, 2, DEVICES)]
    assert len(store.device_spends(0.0)) == DEVICES


def test_a_service_lost_mid_round_shows_as_waited_for_and_is_resumed(tmp_path: Path) -> None:
    """The service drops the result stream and then stays silent for a while (a restart):
    the progress's stage reads "waiting for the aggregator at ADDRESS" meanwhile (before, the
    stage it was last seen in); it then still runs the round, which releases, charged once."""
    stages: list[str] = []

    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        def on_down() -> None:
            progress = coordinator.runner.progress_of("run")
            stages.append(progress.stage if progress else "")
        combiner.plan.silent_calls, combiner.silent_outcomes = 1, 6
        combiner.on_down = on_down

    store, _, raised = outage(tmp_path, setup)
    assert raised is None, raised
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert "waiting for the aggregator at control.example:7100" in stages
    # The wait is a step of its own and the stage it interrupted one again after it (before,
    # the stage's text alone was overwritten: the timeline kept the stage running through it).
    names = [name for name, _ in store.rounds("run")[0].summary["steps"]]
    waits = [i for i, name in enumerate(names) if name.startswith("waiting for the aggregator")]
    assert waits and waits[-1] + 1 < len(names)
    assert not names[waits[-1] + 1].startswith("waiting"), names


def test_a_combiner_whose_workers_all_restart_is_waited_for(tmp_path: Path) -> None:
    """The combiner answers but lists no serving worker for four polls (its workers
    restarting): the attempt waits as for a silent service, and releases. Before, each poll
    aborted an attempt ("the combiner has no serving worker") and the run failed."""
    phases: list[str] = []

    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        def on_down() -> None:
            progress = coordinator.runner.progress_of("run")
            phases.append(progress.phase if progress else "")
        combiner.no_workers_for, combiner.on_down = 4, on_down

    store, _, raised = outage(tmp_path, setup)
    assert raised is None, raised
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert phases[1:] == ["waiting for the aggregator at control.example:7100"] * 3


def test_a_service_that_refuses_the_coordinator_is_not_waited_for(tmp_path: Path) -> None:
    """A refusal is no outage: each attempt aborts at once, as before, the reason naming the
    address, and the run fails without waiting out the patience. (A refused control token
    stops the coordinator instead: test_control_token_refused_before_opening.)"""
    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        combiner.refuses = True

    store, _, raised = outage(tmp_path, setup, patience_s=3600.0)
    assert isinstance(raised, FedhhError)
    assert "the aggregation service at control.example:7100: the aggregation service " \
        "refused DescribeWorkers (INTERNAL" in str(raised)
    assert [state for _, state, _ in attempts(store, "run")] == ["aborted"] * 3
    assert spends(store, "run") == [] and store.device_spends(0.0) == {}


# ---- a service back without the record of a round it accepted (probe 42) ---------------------
def test_a_service_back_without_its_journal_mid_round_has_the_attempt_charged(
        tmp_path: Path) -> None:
    """The service drops the result stream and comes back knowing no round (its journal lost
    with its volume, or moved away as damaged): the attempt it had accepted is charged at n_min
    and the round retried (before, its "no record" was taken for never opened: free)."""
    def setup(combiner: FakeCombiner, coordinator: Coordinator, store: Store) -> None:
        def on_down() -> None:
            combiner.forgets = combiner.calls <= 1  # (the retry's round it does know)
        combiner.plan.silent_calls, combiner.silent_outcomes = 1, 1
        combiner.on_down = on_down

    store, _, raised = outage(tmp_path, setup)
    assert raised is None, raised
    assert [a[:2] for a in attempts(store, "run")] == [(1, "lost"), (2, "released")]
    assert "its record of it is lost" in store.rounds("run")[0].reason
    assert spends(store, "run") == [(0, 1, N_MIN), (0, 2, DEVICES)]  # before: [(0, 2, 24)]


def stopped_once_opened(store: Store, fleet: Fleet, combiner: FakeCombiner,
                        **overrides: Any) -> None:
    """A run of ``config(**overrides)`` whose coordinator dies once its first round opened at
    ``combiner`` (one that ``stalls``), before anything is released."""
    async def first_life() -> None:
        await create_run(store, config(**overrides), "run")
        coordinator = asyncio.create_task(Coordinator(store, fleet, combiner).drive("run"))
        await asyncio.wait_for(combiner.task_arrived.wait(), 60)  # the round opened
        coordinator.cancel()
        with pytest.raises(asyncio.CancelledError):
            await coordinator

    asyncio.run(first_life())


def test_a_restart_that_finds_the_service_without_its_journal_charges_the_attempt(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys, stalls=True)
    stopped_once_opened(store, fleet, combiner, max_attempts=1)
    assert attempts(store, "run") == [(1, "open", 0)]
    successor = FakeCombiner(Plan(every("released")), fleet.keys, forgets=True)

    async def second_life() -> None:
        coordinator = Coordinator(store, fleet, successor)
        with pytest.raises(FedhhError, match=r"released nothing in 1 attempt \("):
            await asyncio.wait_for(coordinator.runner.drive("run"), 60)

    asyncio.run(second_life())
    assert [a[:2] for a in attempts(store, "run")] == [(1, "lost")]  # before: aborted
    assert spends(store, "run") == [(0, 1, N_MIN)]  # before: nothing charged


# ---- the store unavailable at the charge before a sum is read (probe 42) -----------------------
def flaky_charges(store: Store, failures: int) -> list[str]:
    """Make the store's charges before a read (state 'releasing') fail ``failures`` times as
    a lost database connection does; the list of those failed."""
    failed: list[str] = []
    real = store.charge_round

    def charge_round(run_id: str, round_: int, attempt: int, state: str,
                     *args: Any, **kwargs: Any) -> None:
        if state == "releasing" and len(failed) < failures:
            failed.append(f"{round_}.{attempt}")
            raise StoreUnavailable("the database is unavailable: server closed the connection")
        real(run_id, round_, attempt, state, *args, **kwargs)

    store.charge_round = charge_round  # type: ignore[method-assign]
    return failed


def test_a_store_lost_for_a_moment_at_the_charge_is_waited_for_and_the_sum_read(
        tmp_path: Path) -> None:
    """The database restarts while a released total waits for its charge: the charge is
    tried again and the total read, one attempt, one charge (before, the total was dropped
    unread and the attempt, whose total the service no longer held, charged as lost and the
    round run again: two charges; seen in 2 of 8 PostgreSQL restarts of a kill loop)."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys)
    failed = flaky_charges(store, 2)

    async def go() -> None:
        await create_run(store, config(), "run")
        coordinator = Coordinator(store, fleet, combiner)
        coordinator.runner.charge_retry_s = 0.001
        await asyncio.wait_for(coordinator.drive("run"), 60)

    asyncio.run(go())
    assert failed == ["1.1", "1.1"]
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]


def test_a_store_away_past_the_patience_leaves_the_sum_held_and_read_once_it_is_back(
        tmp_path: Path) -> None:
    """The store stays away past the charge's patience (a disk full for longer): the total
    is left unread and uncharged at the service, which holds it (GetResult's hold), and once
    the store answers the runner's next drive resumes the attempt, charges it once and reads
    it. Before, the link cancelled the total: the attempt was charged as lost, its round run
    again (two charges for one round's reports, the first for nothing)."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys, holds_sum=True)
    flaky_charges(store, 1_000_000)

    async def go() -> None:
        await create_run(store, config(), "run")
        coordinator = Coordinator(store, fleet, combiner)
        coordinator.runner.charge_retry_s = coordinator.runner.charge_patience_s = 0.01
        with pytest.raises(StoreUnavailable):  # (the runner waits for the store, then resumes)
            await asyncio.wait_for(coordinator.drive("run"), 60)
        assert attempts(store, "run") == [(1, "open", 0)]  # nothing read, nothing recorded
        assert spends(store, "run") == []
        assert not combiner.cancelled  # the total held unread at the service
        del store.charge_round  # (the store takes writes again)
        await asyncio.wait_for(coordinator.drive("run"), 60)

    asyncio.run(go())
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert store.run("run").state == "done" and not combiner.cancelled


def failing_releases(store: Store, failures: int) -> list[str]:
    """Make the store's commits of a released round fail ``failures`` times as a lost
    database connection does (the sum read, its release not stored); the list of those."""
    failed: list[str] = []
    real = store.release_round

    def release_round(run_id: str, round_: int, attempt: int, *args: Any, **kwargs: Any
                      ) -> None:
        if len(failed) < failures:
            failed.append(f"{round_}.{attempt}")
            raise StoreUnavailable("the database is unavailable: server closed the connection")
        real(run_id, round_, attempt, *args, **kwargs)

    store.release_round = release_round  # type: ignore[method-assign]
    return failed


def test_a_store_failing_to_store_the_release_leaves_the_sum_held_and_read_again(
        tmp_path: Path) -> None:
    """The sum was read, charged, and the store failed as the release was committed: the
    service still holds the sum (the coordinator says it delivered only once the release is
    stored), and the runner's next drive resumes the attempt and reads it again, charged
    once. Before, the sum was said delivered as soon as read: the attempt was settled lost
    (charged) and its round run again."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys, holds_sum=True, store=store)
    failed = failing_releases(store, 1)

    async def go() -> None:
        await create_run(store, config(), "run")
        coordinator = Coordinator(store, fleet, combiner)
        with pytest.raises(StoreUnavailable):  # (the runner waits for the store, then resumes)
            await asyncio.wait_for(coordinator.drive("run"), 60)
        assert attempts(store, "run") == [(1, "releasing", DEVICES)]
        assert combiner.delivered == [] and not combiner.cancelled  # the sum still held
        await asyncio.wait_for(coordinator.drive("run"), 60)

    asyncio.run(go())
    assert failed == ["1.1"]
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert combiner.calls == 2  # read twice, released once
    # said delivered once, after the release was stored
    assert combiner.delivered_seen == [[(1, "released", DEVICES)]]
    assert store.run("run").state == "done"


def test_a_held_total_rebuilt_short_after_its_charge_is_refused_unread(tmp_path: Path) -> None:
    """As above, but the total the service holds when the attempt is resumed proves fewer
    contributors than were charged for it (rebuilt without a shard after a restart): its
    spend was never recorded, so it is refused unread and dropped at the service, the
    attempt lost at its one charge, and the round's next attempt released. Before, it was
    read and released under the first attempt's charge."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    combiner = FakeCombiner(Plan(every("released")), fleet.keys, holds_sum=True, store=store)
    failing_releases(store, 1)

    async def go() -> None:
        await create_run(store, config(), "run")
        coordinator = Coordinator(store, fleet, combiner)
        with pytest.raises(StoreUnavailable):
            await asyncio.wait_for(coordinator.drive("run"), 60)
        assert attempts(store, "run") == [(1, "releasing", DEVICES)]
        combiner.plan = Plan(lambda a: ["released", "released", "aborted"] if a == 1
                             else ["released"] * 3)
        await asyncio.wait_for(coordinator.drive("run"), 60)

    asyncio.run(go())
    assert attempts(store, "run") == [(1, "lost", DEVICES), (2, "released", DEVICES)]
    reason = store.rounds("run")[0].reason
    assert f"has {2 * SHARD} contributors, not the {DEVICES} charged" in reason, reason
    assert spends(store, "run") == [(0, 1, DEVICES), (0, 2, DEVICES)]
    assert combiner.cancelled == [combiner.opened[0][0]]  # the short total dropped unread


def test_a_restart_between_the_stored_release_and_its_delivery_releases_once(
        tmp_path: Path) -> None:
    """The coordinator dies after it stored a release, before the service heard that it was
    delivered: the stored release wins; the next process neither reads the held sum nor
    charges the attempt again (the service drops the sum at its --result-ttl)."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    dying = asyncio.Event()

    async def die() -> None:
        dying.set()
        await asyncio.Event().wait()  # (the process dies in this call)

    combiner = FakeCombiner(Plan(every("released")), fleet.keys, holds_sum=True,
                            delivering=die)
    dies_at(store, fleet, combiner, dying)
    assert attempts(store, "run") == [(1, "released", DEVICES)] and combiner.delivered == []
    successor = next_process(store, fleet, combiner)
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]
    assert successor.calls == 0 and store.run("run").state == "done"


def test_a_run_id_reused_in_a_fresh_store_opens_rounds_of_new_ids(tmp_path: Path) -> None:
    # The aggregation service refuses a round id it has seen finish ('has already finished');
    # before, the ids were run/round/attempt alone, so the same run id in a fresh store (a
    # coordinator started again on a new --db, against the same service) opened the ids of
    # the earlier run's rounds, and each round's first attempt was refused.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, before = scenario(tmp_path / "a", Plan(every("released")))
    again, after = scenario(tmp_path / "b", Plan(every("released")))
    assert attempts(first, "run") == attempts(again, "run") == [(1, "released", DEVICES)]
    (old, old_shards), = before.opened
    (new, new_shards), = after.opened
    assert old != new
    assert not {s.config.round_id for s in old_shards} & {s.config.round_id for s in new_shards}
    # Within one store the ids stay what a restarted coordinator recomputes: the run's tag.
    tag = run_tag("run", first.run_created_at("run"))
    assert old == f"run/1/1/{tag}".encode()
    # (the combined round's id is none of its shards': the loop over the shards once left
    # the last shard's id in its place, and the combiner refused every sharded round,
    # "shard 1 repeats the round id")
    assert old not in {s.config.round_id for s in old_shards}


def test_a_run_cancelled_during_its_check_in_stops_at_once_at_no_cost(tmp_path: Path) -> None:
    """Six of eight devices in the pool, the check-in's window 20 s: the operator's cancel
    closes it at once, the attempt aborts, nothing is opened, charged or sent a task. Before,
    the check-in ran out its window and the round then opened, charged every device and
    released, and the run ended done (seen: `fedhh admin cancel` 7 s into a 10 s check-in,
    eps 0.33 spent)."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store, 6)
    combiner = FakeCombiner(Plan(lambda a: ["released"]), fleet.keys, sharded=False)
    raised: list[BaseException] = []

    async def go() -> None:
        await create_run(store, config(shard_size=None, target_devices=SHARD,
                                       checkin_ms=20_000), "run")
        coordinator = Coordinator(store, fleet, combiner)

        async def cancel_once_pooled() -> None:
            while coordinator.lobby.cohort_size < 6:  # (a readiness wait)
                await asyncio.sleep(0.001)
            coordinator.runner.cancel("run")

        canceller = asyncio.create_task(cancel_once_pooled())
        try:
            await asyncio.wait_for(coordinator.drive("run"), 60)
        except RunCancelled as error:
            raised.append(error)
        await canceller

    asyncio.run(go())
    assert len(raised) == 1
    (attempt, state, _), = attempts(store, "run")
    assert (attempt, state) == (1, "aborted")
    assert store.rounds("run")[0].reason == \
        "cancelled during check-in: no device was drawn or charged"
    assert spends(store, "run") == [] and store.device_spends(0.0) == {}
    assert combiner.opened == [] and combiner.tasks == {}


# ---- a cancel at each stage of an attempt ------------------------------------------------------
STAGES = ["held for returning devices", "opening", "secure aggregation", "released",
          "aborted before unmasking", "lost after unmasking"]
# What the service makes of the round, by stage: "aborted" and "lost" end it without a sum.
FATES = {"aborted before unmasking": "aborted", "lost after unmasking": "lost"}


def cancelled_at(tmp_path: Path, stage: str) -> tuple[Store, FakeCombiner, list[BaseException]]:
    """A run of one unsharded attempt a round whose operator cancels it at ``stage``: while
    its check-in, short of min_devices, is held for the devices of a previous process
    (``Lobby.expect_return``); as the round opens at the service; while the service runs it
    (to its release, or to an abort before or after unmasking began); or once its sum's
    charge is written. What the drive raised."""
    store = Store(tmp_path / "coordinator.sqlite")
    held = stage == "held for returning devices"
    fleet = Fleet(store, N_MIN - 1 if held else SHARD)
    fate = FATES.get(stage, "released")
    combiner = FakeCombiner(Plan(lambda a: [fate]), fleet.keys, sharded=False)
    raised: list[BaseException] = []
    open_single, single_result = combiner.open_single, combiner.single_result

    async def go() -> None:
        await create_run(store, config(shard_size=None, target_devices=SHARD, rounds=2,
                                       checkin_ms=50 if held else 20_000), "run")
        coordinator = Coordinator(store, fleet, combiner)

        def cancel() -> None:
            coordinator.runner.cancel("run")

        async def opening(signed: SignedConfig) -> None:
            cancel()
            await open_single(signed)

        async def aggregating(round_id: bytes, dimension: int, timeout_s: float,
                              on_release: Callable[[ReleaseEvidence], Awaitable[None]]
                              ) -> tuple[np.ndarray, int]:
            async def charged_then_cancelled(evidence: ReleaseEvidence) -> None:
                await on_release(evidence)
                cancel()

            if stage == "secure aggregation" or stage in FATES:
                cancel()
            total, contributors = await single_result(
                round_id, dimension, timeout_s,
                charged_then_cancelled if stage == "released" else on_release)
            total[:] = 1 << 20  # (every prefix heavy: the tree goes on to a second round)
            return total, contributors

        async def once_held() -> None:
            while not coordinator.lobby.is_held:  # (a readiness wait)
                await asyncio.sleep(0.001)
            cancel()

        canceller = None
        if held:
            coordinator.lobby.expect_return(bound)
            canceller = asyncio.create_task(once_held())
        combiner.open_single = opening  # type: ignore[method-assign]
        combiner.single_result = aggregating  # type: ignore[method-assign]
        try:
            await asyncio.wait_for(coordinator.drive("run"), 60)
        except RunCancelled as error:
            raised.append(error)
        if canceller is not None:
            await canceller
            # (ended by the cancel: with the hold kept to its bound, the attempt would abort
            # as cancelled all the same, only 30 s on)
            assert time.time() < bound

    bound = time.time() + 30
    asyncio.run(go())
    return store, combiner, raised


@pytest.mark.parametrize("stage", STAGES)
def test_a_cancel_at_any_stage_of_an_attempt_charges_it_at_most_once(
        tmp_path: Path, stage: str) -> None:
    """A cancel before the round opened (its check-in held for the devices reconnecting after
    a restart, which it ends at once, not at its bound, 30 s on) aborts the attempt free; one
    after (the opening, the service's stages, the written charge) lets the round end: it is
    charged once, at its contributors (n_min where it was lost after unmasking began, nothing
    to the ledger where it aborted before), to the run's ledger and to each member's lifetime
    budget (charged as the round opened), and no attempt follows it."""
    store, combiner, raised = cancelled_at(tmp_path, stage)
    assert len(raised) == 1
    if stage == "held for returning devices":
        (attempt, state, _), = attempts(store, "run")
        assert (attempt, state) == (1, "aborted")
        assert store.rounds("run")[0].reason == \
            "cancelled during check-in: no device was drawn or charged"
        assert spends(store, "run") == [] and store.device_spends(0.0) == {}
        assert combiner.opened == []
        return
    assert len(combiner.opened) == 1 and len(store.device_spends(0.0)) == SHARD
    if stage == "aborted before unmasking":
        assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "aborted")]
        assert spends(store, "run") == []
    elif stage == "lost after unmasking":  # (charged at n_min, as no sum proves more)
        assert [(a, s) for a, s, _ in attempts(store, "run")] == [(1, "lost")]
        assert spends(store, "run") == [(0, 1, N_MIN)]
    else:
        assert attempts(store, "run") == [(1, "released", SHARD)]
        assert spends(store, "run") == [(0, 1, SHARD)]


def test_stage_windows_that_end_before_the_round_opens_abort_it_naming_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of 1 ms each (`--stage-ms 1`, meant as seconds) end while the attempt is drawn
    and signed (a clock that moves 1 s a reading stands for that work): each attempt aborts
    naming the windows and their unit, no round opened, nothing charged. Before, the round was
    opened, and the aggregator refused it as "the round's last deadline (1796509769014 ms) has
    already passed"."""
    from fedhh_coordinator import link

    readings = itertools.count()
    monkeypatch.setattr(link, "time", SimpleNamespace(time=lambda: 1e9 + next(readings)))
    store, combiner, raised = outage(tmp_path, lambda *_: None, stage_ms=1)
    assert isinstance(raised, FedhhError)
    reasons = [r.reason for r in store.rounds("run")]
    assert len(reasons) == 3
    assert reasons[0] == (
        "the round's stage windows ended before it could open: they last 5 ms in all "
        "(--advertise-ms 1, --share-keys-ms 1, --masked-input-ms 1, --consistency-ms 1, "
        "--unmask-ms 1), and drawing and signing its cohort of 24 devices took 1000 ms; the "
        "windows are milliseconds: give longer ones (--stage-ms sets all five)")
    assert combiner.opened == [] and combiner.tasks == {}
    assert spends(store, "run") == [] and store.device_spends(0.0) == {}
