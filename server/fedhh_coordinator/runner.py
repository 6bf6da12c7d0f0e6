"""Drives a run's rounds: check-in, secure aggregation, the ledger, the prefix tree.

One round, as the coordinator sees it (ARCHITECTURE.md "A round in the networked system"):

1. open a new attempt of the tree's next round (persisted) and collect a cohort at check-in;
2. with fewer than ``min_devices`` checked in, abort the attempt (nothing released, no spend);
3. sign a secure-aggregation round config for the cohort (ids 1..n, (k, t) for n, a fresh
   graph seed from the OS, the Merkle root of the members' identity keys) and open it at the
   aggregator; give each member its signed task with its admission (its Merkle proof);
4. wait for the aggregator's outcome. When it starts releasing the sum, check the round against
   the ledger and record its spend (one transaction) *before* reading the sum; refuse and cancel
   if it would exceed the budget. An abort or a lost aggregator releases nothing: retry;
5. advance the prefix tree with the sum and commit the new state (one transaction).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.errors import FedhhError, PrivacyError, StateError
from fedhh.mechanisms import LocalRandomizer, TailKind
from fedhh.prefixtree import PrefixTree, RoundQuery, TreeState
from fedhh.privacy import PrivacyLedger
from fedhh.secagg import (
    AggregateResult,
    IdentityTree,
    RoundConfig,
    SecAggConfigError,
    StageDeadlines,
    choose_parameters,
    issue_admission,
    sign_config,
)
from fedhh.secagg.config import SignedConfig
from fedhh.secagg.merkle import Member
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import metrics
from fedhh_coordinator.auth import TASK_CONTEXT
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.settings import RunSettings
from fedhh_coordinator.store import Store

log = logging.getLogger(__name__)

ReleaseHook = Callable[[int], Awaitable[None]]


class RoundAbortedError(FedhhError):
    """The aggregator released nothing for the round (the reason says why)."""


class AggregatorLink(Protocol):
    """What the runner needs from the secure-aggregation service."""

    async def open_round(self, signed: SignedConfig) -> None: ...

    async def fetch(self, round_id: bytes, timeout_s: float, on_release: ReleaseHook
                    ) -> AggregateResult:
        """Wait for the round's outcome. Before the sum itself is read, ``on_release`` gets the
        number of contributors (and may raise to refuse the sum). RoundAbortedError if the
        round released nothing."""
        ...

    async def cancel(self, round_id: bytes) -> None: ...


@dataclass
class RunContext:
    run_id: str
    settings: RunSettings
    tree: PrefixTree
    state: TreeState
    ledger: PrivacyLedger


class Runner:
    """Runs the coordinator's runs one at a time, in creation order."""

    def __init__(self, store: Store, link: AggregatorLink, key: Ed25519PrivateKey,
                 aggregator_address: str, lobby: Lobby) -> None:
        self.store = store
        self.link = link
        self.key = key
        self.aggregator_address = aggregator_address
        self.lobby = lobby
        self._wake = asyncio.Event()
        self._cancelled: set[str] = set()
        self.backoff_s = 1.0

    def wake(self) -> None:
        self._wake.set()

    def cancel(self, run_id: str) -> None:
        self._cancelled.add(run_id)
        self._wake.set()

    async def serve(self) -> None:
        """Forever: drive the oldest pending or running run; sleep until woken when none."""
        while True:
            active = [r for r in self.store.runs() if r.state in ("pending", "running")]
            if not active:
                self._wake.clear()
                await self._wake.wait()
                continue
            run_id = active[0].run_id
            try:
                await self.drive(run_id)
            except FedhhError as error:
                log.error("run failed", extra={"run_id": run_id, "error": str(error)})
                self.store.set_run_state(run_id, "failed", str(error))
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a bug: fail the run, keep the service up
                log.exception("run crashed", extra={"run_id": run_id})
                self.store.set_run_state(run_id, "failed", f"internal error: {error}")
            finally:
                self.lobby.clear()

    def context(self, run_id: str) -> RunContext:
        row = self.store.run(run_id)
        settings = RunSettings.from_dict(row.config)
        codec = Codec.from_spec(settings.codec, settings.max_bits)
        mechanism = LocalRandomizer(row.eps_local, TailKind(settings.tail))
        tree = PrefixTree(settings.tree(), codec, mechanism,
                          cw.from_ints(row.deny_codes, settings.max_bits))
        return RunContext(run_id, settings, tree, TreeState.from_dict(row.tree),
                          PrivacyLedger.from_dict(row.ledger))

    async def drive(self, run_id: str) -> None:
        ctx = self.context(run_id)
        self._recover(ctx)
        attempts = 0
        while not ctx.state.done:
            if run_id in self._cancelled:
                self.store.set_run_state(run_id, "cancelled", "cancelled by the operator")
                return
            query = ctx.tree.query(ctx.state)
            attempt = self.store.open_round(run_id, query.round)
            attempts += 1
            released = await self._attempt(ctx, query, attempt)
            if released:
                attempts = 0
            elif attempts >= ctx.settings.max_attempts:
                raise StateError(
                    f"round {query.round} released nothing in {attempts} attempts; giving up")
            else:
                await asyncio.sleep(self.backoff_s)
        self.store.set_run_state(run_id, "done")
        log.info("run done", extra={"run_id": run_id})

    def _recover(self, ctx: RunContext) -> None:
        for row in self.store.interrupted_rounds(ctx.run_id):
            if row.state == "open":
                self.store.abort_round(ctx.run_id, row.round, row.attempt,
                                       "the coordinator stopped before the sum was released")
            else:
                raise StateError(
                    f"round {row.round} (attempt {row.attempt}) was being released when the "
                    "coordinator stopped: its spend is recorded, its sum is lost, and the run "
                    "cannot continue within its budget")

    async def _attempt(self, ctx: RunContext, query: RoundQuery, attempt: int) -> bool:
        s = ctx.settings
        started = time.monotonic()
        cohort = await self.lobby.collect(s.target_devices, s.checkin_ms / 1000)
        if len(cohort) < s.min_devices:
            self._abort(ctx, query, attempt, f"only {len(cohort)} devices checked in "
                        f"(min_devices {s.min_devices})")
            return False
        # Secure-aggregation ids 1..n in cohort order, each with its registered identity key
        # and the round keys it presented at check-in.
        members = [(device_id, (record[1], *self.lobby.round_keys(device_id)))
                   for device_id in cohort
                   if (record := self.store.device(device_id)) is not None]
        try:
            signed, config, identities = self._round_config(ctx, query, attempt,
                                                            [keys for _, keys in members])
        except SecAggConfigError as error:
            self._abort(ctx, query, attempt, f"no secure-aggregation parameters: {error}")
            return False
        try:
            await self.link.open_round(signed)
        except FedhhError as error:
            self._abort(ctx, query, attempt, f"aggregator refused the round: {error}")
            return False
        self.lobby.deliver(self._tasks(ctx, query, attempt, [d for d, _ in members], signed,
                                       config, identities))
        metrics.ROUND_DEVICES.set(len(members))

        release_started = False

        async def on_release(contributors: int) -> None:
            nonlocal release_started
            try:
                ledger = ctx.ledger.record(query.round - 1, contributors)
            except PrivacyError:
                await self.link.cancel(config.round_id)  # the sum is dropped unread
                raise
            self.store.begin_release(ctx.run_id, query.round, attempt, contributors,
                                     ledger.to_dict())
            ctx.ledger = ledger
            release_started = True
            metrics.EPS_SPENT.labels(ctx.run_id).set(ctx.ledger.spent_epsilon())

        slack_s = max(s.stage_windows()) / 1000 + 30
        timeout = config.deadlines.unmask / 1000 - time.time() + slack_s
        try:
            result = await self.link.fetch(config.round_id, max(timeout, 1.0), on_release)
        except RoundAbortedError as error:
            if release_started:
                raise StateError(
                    f"round {query.round} (attempt {attempt}) was lost while its sum was being "
                    f"released ({error}): its spend is recorded, and the run cannot continue "
                    "within its budget") from None
            self._abort(ctx, query, attempt, str(error))
            return False
        finally:
            self.lobby.clear()
        new_state, report = ctx.tree.advance(ctx.state, result.total.astype(np.int64),
                                             result.num_contributors)
        summary = report.to_dict()
        summary["seconds"] = time.monotonic() - started
        self.store.finish_release(ctx.run_id, query.round, attempt, new_state.to_dict(), summary,
                                  new_state.done)
        ctx.state = new_state
        metrics.ROUNDS.labels("released").inc()
        metrics.ROUND_SECONDS.observe(summary["seconds"])
        log.info("round released", extra={"run_id": ctx.run_id, "round": query.round,
                                          "attempt": attempt,
                                          "contributors": result.num_contributors,
                                          "kept": report.kept, "finished": report.finished})
        return True

    def _abort(self, ctx: RunContext, query: RoundQuery, attempt: int, reason: str) -> None:
        self.store.abort_round(ctx.run_id, query.round, attempt, reason)
        metrics.ROUNDS.labels("aborted").inc()
        log.warning("round aborted", extra={"run_id": ctx.run_id, "round": query.round,
                                            "attempt": attempt, "reason": reason})

    def _round_config(self, ctx: RunContext, query: RoundQuery, attempt: int,
                      members: list[Member]
                      ) -> tuple[SignedConfig, RoundConfig, IdentityTree]:
        """The signed config of a cohort whose member i (1-based) holds ``members[i-1]``
        (identity key, c_pk, s_pk), and the Merkle tree over those keys whose root the config
        commits to (built once per round; each member's admission is its proof in it)."""
        s = ctx.settings
        n = len(members)
        params = choose_parameters(n, s.expected_dropout, s.corrupt_fraction)
        # Each deadline is the previous one plus its stage's window; the consistency check is
        # off, so it has no time of its own (its deadline is the masked input's).
        advertise, share, masked, unmask = s.stage_windows()
        t0 = int(time.time() * 1000)
        t1 = t0 + advertise
        t2 = t1 + share
        t3 = t2 + masked
        deadlines = StageDeadlines(t1, t2, t3, t3, t3 + unmask)
        round_id = f"{ctx.run_id}/{query.round}/{attempt}".encode()
        graph_seed = os.urandom(32)
        identities = IdentityTree(round_id, graph_seed, members)
        config = RoundConfig(
            round_id=round_id,
            num_devices=n,
            dimension=query.domain_size,
            modulus_bits=params.modulus_bits,
            n_min=min(s.min_devices, n),
            k=params.k,
            t=params.t,
            graph_seed=graph_seed,
            deadlines=deadlines,
            device_auth=True,
            identity_root=identities.root,
        )
        return sign_config(config, self.key), config, identities

    def _tasks(self, ctx: RunContext, query: RoundQuery, attempt: int, cohort: list[int],
               signed: SignedConfig, config: RoundConfig, identities: IdentityTree
               ) -> dict[int, pb.SignedTask]:
        """One signed task per member; ``cohort[i-1]`` is secure-aggregation id i."""
        s = ctx.settings
        tasks = {}
        for secagg_id, device_id in enumerate(cohort, start=1):
            admission = issue_admission(identities, secagg_id)
            task = pb.Task(
                run_id=ctx.run_id, round=query.round, attempt=attempt, device_id=device_id,
                prefix_bits=query.prefix_bits,
                prefixes=cw.to_wire(query.prefixes, query.prefix_bits),
                deny_list=cw.to_wire(query.deny, query.max_bits),
                segment_bits=query.segment_bits,
                eps_local=ctx.tree.mechanism.eps_local,  # type: ignore[union-attr]
                codec=s.codec, max_bits=s.max_bits, selection=s.selection,
                prefix_conditioning=s.prefix_conditioning,
                aggregator_address=self.aggregator_address, round_config=signed.payload,
                round_config_signature=signed.signature,
                secagg_id=secagg_id, admission=admission.proof,
                deadline_unix_ms=config.deadlines.unmask,
            )
            payload = task.SerializeToString()
            tasks[device_id] = pb.SignedTask(task=payload,
                                             signature=self.key.sign(TASK_CONTEXT + payload))
        return tasks
