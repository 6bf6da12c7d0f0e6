"""The coordinator's ``AggregatorLink`` (``fedhh.rounds``): a round attempt over the network.

One attempt, as the coordinator runs it (docs/networked.md, "A round"):

1. check-in: a cohort of up to ``target_devices`` is drawn from the devices that check in
   (``Lobby``); with fewer than ``min_devices`` the attempt is aborted before anything is sent;
2. a secure-aggregation round config is signed for the cohort (ids 1..n, lying-server (k, t)
   for n, the consistency check on, a fresh graph seed from the OS, the Merkle root of the
   members' identity and round keys) and opened at the aggregator; what a restart needs to
   settle the attempt is stored before the aggregator hears of it;
3. each member gets its signed task with its admission (its Merkle proof);
4. the aggregator's outcome: before the sum is read, the driver's charge hook records the spend
   at the number of contributors; an abort releases nothing; a lost aggregator is asked, once it
   answers again, whether unmasking began.

Sharded rounds (``RunConfig.shard_size``; docs/scaling.md): when the aggregation address is a
combiner, the cohort is split at random into shards (``fedhh.secagg.shards``), each with its own
signed config (ids 1..n_j, its own graph seed and (k, t), the Merkle root of its own members)
placed on one of the combiner's serving workers; each member's task names its shard's config
and its worker's address. The combiner releases one total with every shard's evidence; it is
checked shard by shard against the configs signed here (``verify_sharded_release``) and charged
once. A single aggregator runs unsharded rounds exactly as before; a round that would need
several shards is refused there (the coordinator must never see a shard sum).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.errors import FedhhError
from fedhh.rounds import AttemptId, ChargeHook, Recovered, Recovery, Released, RoundAborted
from fedhh.rpc.tasks import sign_task
from fedhh.secagg import (
    IdentityTree,
    ReleaseEvidence,
    ReleaseEvidenceError,
    RoundConfig,
    SecAggConfigError,
    StageDeadlines,
    Threat,
    choose_parameters,
    issue_admission,
    sign_config,
    verify_release,
)
from fedhh.secagg.config import SignedConfig
from fedhh.secagg.merkle import Member
from fedhh.secagg.shards import ShardRelease, shard_sizes, split_cohort, verify_sharded_release
from fedhh.server import RoundQuery
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import metrics
from fedhh_coordinator.budgets import RunAdmission
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.progress import Progress
from fedhh_coordinator.store import Store

log = logging.getLogger(__name__)

# How long a link waits for a lost aggregator to answer again before it gives the attempt up
# as unknown (and so charged).
RECOVERY_PATIENCE_S = 120.0


@dataclass(frozen=True)
class AggregatorOutcome:
    """What the aggregator says about a round: ``state`` "never" (a journaling aggregator has
    no record of it: it never opened), "unknown" (no record, no journal: nobody can say),
    "running", "aborted" or "released"; ``reached_unmask`` whether any unmasking request went
    out; ``sum_available`` whether a released sum is still held for the coordinator."""

    state: str
    reached_unmask: bool = False
    sum_available: bool = False
    contributors: int | None = None
    reason: str = ""
    stage: str = ""  # the protocol stage of a running round
    stage_devices: dict[str, int] = field(default_factory=dict)  # accepted per closed stage


EvidenceHook = Callable[[ReleaseEvidence], Awaitable[None]]
ShardsHook = Callable[[list[ShardRelease]], Awaitable[None]]


class AggregatorUnavailable(FedhhError):
    """The aggregator did not answer (down, restarting, unreachable)."""


class AggregatorApi(Protocol):
    """The aggregator's control API as the link needs it (gRPC: ``fedhh_coordinator.control``)."""

    async def open_round(self, signed: SignedConfig) -> None: ...

    async def result(self, round_id: bytes, timeout_s: float, on_release: EvidenceHook
                     ) -> tuple[np.ndarray, int]:
        """Wait for the round's sum; ``on_release(evidence)`` runs before it is read.
        Raises RoundAborted (nothing released; ``reached_unmask`` says if unmasking began),
        TimeoutError, or AggregatorUnavailable."""
        ...

    async def outcome(self, round_id: bytes, sharded: bool = False) -> AggregatorOutcome: ...

    async def cancel(self, round_id: bytes, sharded: bool = False) -> None: ...

    async def workers(self) -> list[tuple[int, str]] | None:
        """A combiner's serving workers (index, public address); None: a single aggregator."""
        ...

    async def open_sharded(self, round_id: bytes, shards: list[tuple[SignedConfig, int]]
                           ) -> None: ...

    async def sharded_result(self, round_id: bytes, timeout_s: float, on_release: ShardsHook
                             ) -> tuple[np.ndarray, int]:
        """As ``result``, for a sharded round: ``on_release(shards)`` before the total is read."""
        ...


@dataclass(frozen=True)
class _ShardPlan:
    """One shard of an attempt: its signed config, members (device ids, secure-aggregation id
    i is ``members[i-1]``), identity tree and worker."""

    signed: SignedConfig
    config: RoundConfig
    members: list[int]
    identities: IdentityTree
    worker: int
    address: str


class NetworkLink:
    """Round attempts of one run over the network (module docstring)."""

    def __init__(self, config: RunConfig, round_epsilon: Callable[[int], float], store: Store,
                 aggregator: AggregatorApi, lobby: Lobby, key: Ed25519PrivateKey,
                 aggregator_address: str, admission: RunAdmission,
                 progress: Progress | None = None) -> None:
        """``round_epsilon``: the local epsilon of a round (0-based index), the ledger's."""
        self.config = config
        self.round_epsilon = round_epsilon
        self.store = store
        self.aggregator = aggregator
        self.lobby = lobby
        self.key = key
        self.aggregator_address = aggregator_address
        self.admission = admission
        self.progress = progress or Progress()
        self.recovery_patience_s = RECOVERY_PATIENCE_S

    # ---- AggregatorLink -------------------------------------------------------------------
    async def collect(self, attempt: AttemptId, query: RoundQuery,
                      charge: ChargeHook) -> Released:
        s = self.config
        try:
            workers = await self.aggregator.workers()
        except AggregatorUnavailable as error:
            raise RoundAborted(f"the aggregation service did not answer: {error}") from None
        if workers is None and s.shard_size is not None and len(
                shard_sizes(s.target_devices, s.shard_size)) > 1:
            raise RoundAborted("sharded rounds (shard_size) need a combiner at --aggregator: "
                               "a single aggregator would hand the coordinator shard sums")
        if workers is not None and not workers:
            raise RoundAborted("the combiner has no serving worker")
        self.progress.enter(attempt.round, attempt.attempt, "check-in")
        try:
            cohort = await self.lobby.collect(
                s.target_devices, s.checkin_ms / 1000,
                pool_size=math.ceil(s.oversubscription * s.target_devices),
                quiet_s=s.checkin_quiet_ms / 1000, eligible=self.admission.eligible)
            if len(cohort) < s.min_devices:
                raise RoundAborted(f"only {len(cohort)} devices checked in (min_devices "
                                   f"{s.min_devices})")
            members = [(device_id, (record[1], *self.lobby.round_keys(device_id)))
                       for device_id in cohort
                       if (record := self.store.device(device_id)) is not None]
            # Charged before the devices hear of the round (their lifetime budgets).
            self.admission.charge([device_id for device_id, _ in members])
            if workers is not None:
                return await self._collect_sharded(attempt, query, charge, members, workers)
            try:
                signed, config, identities = self._round_config(attempt, query,
                                                                [keys for _, keys in members])
            except SecAggConfigError as error:
                raise RoundAborted(f"no secure-aggregation parameters: {error}") from None
            # What a restart needs to settle or collect the attempt, stored before the
            # aggregator hears of it.
            self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt, {
                "aggregator_round_id": config.round_id.decode(),
                "round_config": signed.payload.hex(),
                "members": [device_id for device_id, _ in members],
                "deadline_unix_ms": config.deadlines.unmask})
            try:
                await self.aggregator.open_round(signed)
            except FedhhError as error:
                raise RoundAborted(f"the aggregator refused the round: {error}") from None
            self.lobby.deliver(self._tasks(attempt, query, [d for d, _ in members], signed,
                                           config, identities))
            metrics.ROUND_DEVICES.set(len(members))
            self.progress.enter(attempt.round, attempt.attempt, "secure aggregation",
                                len(members))
            keys = {i: keys[0] for i, (_, keys) in enumerate(members, start=1)}
            timeout = config.deadlines.unmask / 1000 - time.time() + self._slack_s()
            return await self._fetch_and_remember(attempt, config, keys, max(timeout, 1.0),
                                                  charge)
        finally:
            self.lobby.clear()

    async def recover(self, attempt: AttemptId) -> Recovered:
        annotation = self._annotation(attempt)
        if "aggregator_round_id" not in annotation:
            return Recovered(Recovery.NOTHING, "the round never reached the aggregator")
        outcome = await self._patient_outcome(annotation["aggregator_round_id"].encode(),
                                              bool(annotation.get("sharded")))
        return _verdict(outcome)

    async def resume(self, attempt: AttemptId, query: RoundQuery,
                     charge: ChargeHook) -> Released:
        annotation = self._annotation(attempt)
        if annotation.get("sharded"):
            return await self._resume_sharded(attempt, annotation, charge)
        config = RoundConfig.from_bytes(bytes.fromhex(annotation["round_config"]))
        self.progress.enter(attempt.round, attempt.attempt, "secure aggregation",
                            len(annotation["members"]))
        keys = {}
        for i, device_id in enumerate(annotation["members"], start=1):
            record = self.store.device(int(device_id))
            if record is not None:
                keys[i] = record[1]
        timeout = annotation["deadline_unix_ms"] / 1000 - time.time() + self._slack_s()
        return await self._fetch_and_remember(attempt, config, keys, max(timeout, 1.0), charge)

    # ---- sharded rounds -------------------------------------------------------------------
    async def _collect_sharded(self, attempt: AttemptId, query: RoundQuery, charge: ChargeHook,
                               members: list[tuple[int, Member]],
                               workers: list[tuple[int, str]]) -> Released:
        """The attempt as a sharded round at the combiner (module docstring)."""
        keys = dict(members)
        deadlines = self._deadlines()
        plans: list[_ShardPlan] = []
        try:
            for j, shard in enumerate(split_cohort(list(keys), self.config.shard_size,
                                                        len(workers))):
                worker, address = workers[j % len(workers)]
                signed, config, identities = self._round_config(
                    attempt, query, [keys[d] for d in shard], _shard_round_id(attempt, j),
                    deadlines)
                plans.append(_ShardPlan(signed, config, shard, identities, worker, address))
        except SecAggConfigError as error:
            raise RoundAborted(f"no secure-aggregation parameters: {error}") from None
        round_id = _round_id(attempt)
        self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt, {
            "aggregator_round_id": round_id.decode(), "sharded": True,
            "shards": [{"round_config": p.signed.payload.hex(), "members": p.members,
                        "worker": p.worker} for p in plans],
            "deadline_unix_ms": deadlines.unmask})
        try:
            await self.aggregator.open_sharded(round_id, [(p.signed, p.worker) for p in plans])
        except FedhhError as error:
            raise RoundAborted(f"the combiner refused the round: {error}") from None
        tasks: dict[int, pb.SignedTask] = {}
        for plan in plans:
            tasks.update(self._tasks(attempt, query, plan.members, plan.signed, plan.config,
                                     plan.identities, plan.address))
        self.lobby.deliver(tasks)
        metrics.ROUND_DEVICES.set(len(members))
        self.progress.enter(attempt.round, attempt.attempt, "secure aggregation", len(members))
        identity_keys = [{i: keys[d][0] for i, d in enumerate(p.members, start=1)}
                         for p in plans]
        timeout = deadlines.unmask / 1000 - time.time() + self._slack_s()
        return await self._fetch_sharded_and_remember(
            attempt, round_id, [p.config for p in plans], identity_keys, max(timeout, 1.0),
            charge)

    async def _resume_sharded(self, attempt: AttemptId, annotation: dict[str, Any],
                              charge: ChargeHook) -> Released:
        configs, identity_keys = [], []
        for shard in annotation["shards"]:
            configs.append(RoundConfig.from_bytes(bytes.fromhex(shard["round_config"])))
            keys = {}
            for i, device_id in enumerate(shard["members"], start=1):
                record = self.store.device(int(device_id))
                if record is not None:
                    keys[i] = record[1]
            identity_keys.append(keys)
        self.progress.enter(attempt.round, attempt.attempt, "secure aggregation",
                            sum(len(s["members"]) for s in annotation["shards"]))
        timeout = annotation["deadline_unix_ms"] / 1000 - time.time() + self._slack_s()
        return await self._fetch_sharded_and_remember(
            attempt, annotation["aggregator_round_id"].encode(), configs, identity_keys,
            max(timeout, 1.0), charge)

    async def _fetch_sharded_and_remember(self, attempt: AttemptId, round_id: bytes,
                                          configs: list[RoundConfig],
                                          identity_keys: list[dict[int, bytes]],
                                          timeout_s: float, charge: ChargeHook) -> Released:
        try:
            return await self._fetch_sharded(round_id, configs, identity_keys, timeout_s,
                                             charge)
        finally:
            await self._remember(attempt, round_id, sharded=True)

    async def _fetch_sharded(self, round_id: bytes, configs: list[RoundConfig],
                             identity_keys: list[dict[int, bytes]], timeout_s: float,
                             charge: ChargeHook) -> Released:
        """The round's total, charged once before it is read at the count the shards' evidence
        proves (``verify_sharded_release``: n_min instead if a shard reached unmasking outside
        the total). A release that does not follow the plan, or a shard that proves fewer than
        its n_min, refuses the total: the attempt is charged and its total never read."""
        charged = False

        async def on_release(shards: list[ShardRelease]) -> None:
            nonlocal charged
            refusal: str | None
            count: int | None
            try:
                verdict = verify_sharded_release(configs, identity_keys, shards,
                                                 self.config.min_devices)
            except ReleaseEvidenceError as error:
                refusal, count = str(error), None  # the driver charges n_min (as in _fetch)
            else:
                refusal, count = verdict.refusal, verdict.charge
            if refusal is not None:
                with contextlib.suppress(FedhhError):
                    await self.aggregator.cancel(round_id, sharded=True)
                charged = True
                raise RoundAborted(f"refused the total: {refusal}", reached_unmask=True,
                                   contributors=count)
            if verdict.lost:
                log.warning("a shard reached unmasking outside the total: charged at n_min",
                            extra={"round_id": round_id.decode(errors="replace"),
                                   "lost": [r.decode(errors="replace") for r in verdict.lost]})
            self.progress.enter(self.progress.round, self.progress.attempt, "releasing",
                                verdict.proven)
            try:
                await charge(verdict.charge)
            except BaseException:
                with contextlib.suppress(FedhhError):
                    await self.aggregator.cancel(round_id, sharded=True)
                raise
            charged = True

        return await self._await_sum(
            round_id, lambda wait_s: self.aggregator.sharded_result(round_id, wait_s, on_release),
            timeout_s, lambda: charged, sharded=True)

    # ---- the pieces -----------------------------------------------------------------------
    def _annotation(self, attempt: AttemptId) -> dict[str, Any]:
        row = next((r for r in self.store.rounds(attempt.run_id)
                    if (r.round, r.attempt) == (attempt.round, attempt.attempt)), None)
        return {} if row is None else row.summary

    def _slack_s(self) -> float:
        """Time allowed past the last deadline for the unmasking work and the transfer."""
        return max(self.config.stage_windows()) / 1000 + 30

    async def _fetch_and_remember(self, attempt: AttemptId, config: RoundConfig,
                                  identity_keys: dict[int, bytes], timeout_s: float,
                                  charge: ChargeHook) -> Released:
        """``_fetch``, then the attempt's steps and the aggregator's last per-stage counts
        kept in its round summary, whatever the outcome (the operator's dropout rates)."""
        try:
            released = await self._fetch(config, identity_keys, timeout_s, charge)
        except Exception:
            await self._remember(attempt, config.round_id)
            raise
        await self._remember(attempt, config.round_id)
        return released

    async def _remember(self, attempt: AttemptId, round_id: bytes, sharded: bool = False
                        ) -> None:
        with contextlib.suppress(AggregatorUnavailable):
            outcome = await self.aggregator.outcome(round_id, sharded)
            self.progress.observe_stage("", outcome.stage_devices)
        self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                  self.progress.summary())

    async def _fetch(self, config: RoundConfig, identity_keys: dict[int, bytes],
                     timeout_s: float, charge: ChargeHook) -> Released:
        """The round's sum, charged at the number of contributors its evidence proves
        (``fedhh.secagg.verify_release``: survivors' signatures over U3) before it is read.
        Evidence that does not prove at least n_min contributors is refused: the attempt is
        charged (the sum exists) at the count it proves, and its sum is never read."""
        round_id = config.round_id
        charged = False

        async def on_release(evidence: ReleaseEvidence) -> None:
            nonlocal charged
            try:
                proven = verify_release(config, identity_keys, evidence)
            except ReleaseEvidenceError as error:
                proven, problem = 0, str(error)
            else:
                problem = f"the release proves {proven} contributors < n_min {config.n_min}"
            if proven < config.n_min:
                with contextlib.suppress(FedhhError):
                    await self.aggregator.cancel(round_id)  # the sum is dropped unread
                charged = True
                # Charged at n_min, not at what the evidence proves: a device unmasks only for a
                # survivor set of at least n_min that t of its neighbours signed, so any sum
                # holding an honest device's report is over n_min reports or more, and n_min
                # costs most among those counts. Charging the proven count (down to 2) would let
                # one lying release burn the run's budget.
                raise RoundAborted(f"refused the sum: {problem}", reached_unmask=True,
                                   contributors=config.n_min)
            self.progress.enter(self.progress.round, self.progress.attempt, "releasing", proven)
            try:
                await charge(proven)
            except BaseException:
                with contextlib.suppress(FedhhError):
                    await self.aggregator.cancel(round_id)  # the sum is dropped unread
                raise
            charged = True

        return await self._await_sum(
            round_id, lambda wait_s: self.aggregator.result(round_id, wait_s, on_release),
            timeout_s, lambda: charged)

    async def _await_sum(self, round_id: bytes,
                         fetch: Callable[[float], Awaitable[tuple[np.ndarray, int]]],
                         timeout_s: float, charged: Callable[[], bool], sharded: bool = False
                         ) -> Released:
        """``fetch(wait_s)`` until the round's sum arrives. A round past its deadline is
        cancelled and settled by the aggregation service's word on it. A service that stops
        answering (restarting, or starved past a call's timeout) is asked patiently what became
        of the round; while it still runs the round or holds its sum, the wait goes on (until
        the deadline), instead of giving up an attempt that may still release."""
        what = "combiner" if sharded else "aggregator"
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_s
        watcher = asyncio.create_task(self._watch_stage(round_id, sharded))
        try:
            while True:
                try:
                    total, contributors = await fetch(max(until - loop.time(), 1.0))
                    return Released(total.astype(np.int64), contributors)
                except TimeoutError:
                    with contextlib.suppress(FedhhError):
                        await self.aggregator.cancel(round_id, sharded)
                    outcome = await self._patient_outcome(round_id, sharded)
                    raise _aborted("the round did not finish before its deadline",
                                   outcome) from None
                except AggregatorUnavailable as error:
                    if charged():
                        raise RoundAborted(f"lost the {what} while reading the sum ({error})",
                                           reached_unmask=True) from None
                    outcome = await self._patient_outcome(round_id, sharded)
                    if _verdict(outcome).verdict is not Recovery.RESUME or loop.time() >= until:
                        raise _aborted(f"lost the {what} ({error})", outcome) from None
                    log.info(f"the {what} answers again and still has the round",
                             extra={"round_id": round_id.decode(errors="replace")})
        finally:
            watcher.cancel()

    async def _watch_stage(self, round_id: bytes, sharded: bool = False) -> None:
        """Show the aggregator's stage in the run's progress while the round runs."""
        while True:
            with contextlib.suppress(AggregatorUnavailable):
                outcome = await self.aggregator.outcome(round_id, sharded)
                if outcome.state == "running":
                    self.progress.observe_stage(outcome.stage, outcome.stage_devices)
            await asyncio.sleep(1.0)

    async def _patient_outcome(self, round_id: bytes, sharded: bool = False
                               ) -> AggregatorOutcome:
        """The aggregator's word on a round, waiting (with backoff) while it is unreachable;
        unknown if it stays silent for ``recovery_patience_s``."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.recovery_patience_s
        delay = 0.2
        while True:
            try:
                return await self.aggregator.outcome(round_id, sharded)
            except AggregatorUnavailable as error:
                if loop.time() >= give_up:
                    return AggregatorOutcome("unknown", reason=f"the aggregator stayed "
                                             f"unreachable ({error})")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _deadlines(self) -> StageDeadlines:
        advertise, share, masked, consistency, unmask = self.config.stage_windows()
        t0 = int(time.time() * 1000)
        t1 = t0 + advertise
        t2 = t1 + share
        t3 = t2 + masked
        t4 = t3 + consistency
        return StageDeadlines(t1, t2, t3, t4, t4 + unmask)

    def _round_config(self, attempt: AttemptId, query: RoundQuery, members: list[Member],
                      round_id: bytes | None = None, deadlines: StageDeadlines | None = None
                      ) -> tuple[SignedConfig, RoundConfig, IdentityTree]:
        """The signed config of a cohort whose member i (1-based) holds ``members[i-1]``
        (identity key, c_pk, s_pk), and the Merkle tree over those keys whose root the config
        commits to (built once per attempt; each member's admission is its proof in it)."""
        s = self.config
        n = len(members)
        params = choose_parameters(n, s.expected_dropout, s.corrupt_fraction, Threat.LYING)
        deadlines = deadlines or self._deadlines()
        round_id = round_id or _round_id(attempt)
        graph_seed = os.urandom(32)
        identities = IdentityTree(round_id, graph_seed, members)
        config = RoundConfig(
            round_id=round_id, num_devices=n, dimension=query.domain_size,
            modulus_bits=params.modulus_bits, n_min=min(s.min_devices, n), k=params.k,
            t=params.t, graph_seed=graph_seed, deadlines=deadlines, device_auth=True,
            consistency_check=True, identity_root=identities.root,
        )
        return sign_config(config, self.key), config, identities

    def _tasks(self, attempt: AttemptId, query: RoundQuery, cohort: list[int],
               signed: SignedConfig, config: RoundConfig, identities: IdentityTree,
               address: str | None = None) -> dict[int, pb.SignedTask]:
        """One signed task per member; ``cohort[i-1]`` is secure-aggregation id i."""
        s = self.config
        tasks = {}
        for secagg_id, device_id in enumerate(cohort, start=1):
            admission = issue_admission(identities, secagg_id)
            task = pb.Task(
                run_id=attempt.run_id, round=attempt.round, attempt=attempt.attempt,
                device_id=device_id, prefix_bits=query.prefix_bits,
                prefixes=cw.to_wire(query.prefixes, query.prefix_bits),
                deny_list=cw.to_wire(query.deny, query.max_bits),
                segment_bits=query.segment_bits,
                eps_local=self.round_epsilon(query.round - 1), codec=s.codec,
                max_bits=query.max_bits, selection=s.selection,
                prefix_conditioning=s.prefix_conditioning,
                aggregator_address=address or self.aggregator_address,
                round_config=signed.payload,
                round_config_signature=signed.signature, secagg_id=secagg_id,
                admission=admission.proof, deadline_unix_ms=config.deadlines.unmask,
            )
            tasks[device_id] = sign_task(task, self.key)
        return tasks


def _round_id(attempt: AttemptId) -> bytes:
    return _bounded(f"{attempt.run_id}/{attempt.round}/{attempt.attempt}".encode())


def _shard_round_id(attempt: AttemptId, shard: int) -> bytes:
    return _bounded(f"{attempt.run_id}/{attempt.round}/{attempt.attempt}/s{shard}".encode())


def _bounded(round_id: bytes) -> bytes:
    """A round id within RoundConfig's 64 bytes (a long one by its digest)."""
    if len(round_id) <= 64:
        return round_id
    return b"h/" + hashlib.sha256(round_id).hexdigest()[:62].encode()


def _verdict(outcome: AggregatorOutcome) -> Recovered:
    """What an attempt left unsettled costs, from the aggregator's word on it.

    A lost attempt carries no count: the aggregator's ``contributors`` is its own unverified
    word, and a larger count would shrink the charge of a sum that exists. The driver charges
    such an attempt at n_min, the smallest survivor set an honest device unmasks for (issue 28:
    charged at the aggregator's count before)."""
    if outcome.state == "never":
        return Recovered(Recovery.NOTHING, outcome.reason)
    if outcome.state == "running":
        return Recovered(Recovery.RESUME, "the aggregator is still running it")
    if outcome.state == "released" and outcome.sum_available:
        return Recovered(Recovery.RESUME, "the aggregator still holds its sum")
    if outcome.state == "released":
        return Recovered(Recovery.LOST, "its sum was delivered to a coordinator that stopped")
    if outcome.state == "aborted" and not outcome.reached_unmask:
        return Recovered(Recovery.NOTHING, f"the aggregator aborted it before unmasking "
                         f"({outcome.reason})")
    if outcome.state == "aborted":
        return Recovered(Recovery.LOST, f"the aggregator aborted it after unmasking began "
                         f"({outcome.reason})")
    return Recovered(Recovery.LOST, f"nobody can say whether unmasking began "
                     f"({outcome.reason or 'the aggregator does not know the round'})")


def _aborted(reason: str, outcome: AggregatorOutcome) -> RoundAborted:
    verdict = _verdict(outcome)
    if verdict.verdict is Recovery.NOTHING:
        return RoundAborted(f"{reason}; {verdict.reason}")
    return RoundAborted(f"{reason}; {verdict.reason}", reached_unmask=True)
