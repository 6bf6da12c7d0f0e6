"""The combiner's rounds: opening a sharded round on its workers, the running and finished
rounds, tombstones, and the journal that lets a restarted combiner take its rounds over.

Opening checks every shard's config (the coordinator's signature, device authentication and
the consistency check, one dimension, distinct round ids, a known worker) before anything is
sent, journals the round with its shards, then opens every shard on its worker and journals
that they opened (``shards_opened``) before it answers; if one cannot open, or that record
cannot be written, the others are cancelled and the round is recorded as aborted before
unmasking (nothing was revealed: the coordinator may retry under a new round id).

With a journal (``--state-dir``), a round that was running when the combiner stopped is taken
over again at start: its shards ran on at their workers, so the new collector fetches their
outcomes as the old one would have, shard sums the old one had taken in included (held at their
workers until the total is delivered or dropped: ``CombinedRound``). So is a released round
whose total was neither delivered nor dropped, within ``result_ttl_s`` of its release: its
total is rebuilt from the sums its workers still hold. Before, such a total was lost with the
process (the round reported released, ``sum_available`` false: the coordinator charged it), as
it still is for a round journaled before the workers held their sums (its ``finish`` has no
``held``), past ``result_ttl_s``, or whose shards no longer fit the combiner.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import grpc

from fedhh.errors import AuthenticationError, ConfigError, FedhhError, StateError
from fedhh.secagg import RoundConfig, SignedConfig
from fedhh.secagg.primitives import ed25519_verify
from fedhh.secagg.shards import MAX_SHARDS
from fedhh_aggregator.combined import CombinedRound, CombinerLimits, Shard, drop_held
from fedhh_aggregator.errors import CapacityError, JournalError
from fedhh_aggregator.journal import Journal, RoundRecord
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome, RoundBook, Tombstone
from fedhh_aggregator.registry import recorded_outcome
from fedhh_aggregator.rounds import RoundState, check_round_id, round_label
from fedhh_aggregator.workers import WorkerPool

__all__ = ["CombinerRegistry", "Placement"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    """One shard as the coordinator asks for it: its signed config and its worker."""

    signed: SignedConfig
    worker: int


@dataclass(frozen=True)
class _Tombstone(Tombstone):
    shards: tuple[Shard, ...] = ()


class CombinerRegistry(RoundBook[CombinedRound, _Tombstone]):
    """The sharded rounds the combiner holds, and the tombstones of dropped ones."""

    sum_name = "total"
    fetcher = "the coordinator"

    def __init__(self, coordinator_public: bytes, pool: WorkerPool,
                 limits: CombinerLimits | None = None, journal: Journal | None = None) -> None:
        self.coordinator_public = coordinator_public
        self.pool = pool
        self.limits = limits or CombinerLimits()
        super().__init__(journal, self.limits.max_tombstones, self.limits.tombstone_ttl_s)
        # Rounds telling their workers to drop the shard sums they hold (forgotten released
        # rounds, aborted ones, refused sums), each tried again while its worker is away:
        # ``close`` ends them.
        self._letting_go: set[asyncio.Task[None]] = set()

    # -- restart -------------------------------------------------------------------------------

    def restore(self) -> None:
        """Replay the journal: finished rounds become tombstones, running ones (and released
        ones whose total is still to be fetched: the module docstring) are taken over (their
        collectors start)."""
        if self.journal is None:
            return
        records = self.journal.load()
        for record in sorted(records.values(), key=lambda r: r.finished_at or r.opened_at):
            label = f"{self.journal.path}: round {round_label(record.round_id)!r}"
            try:
                shards, unlisted = _shards_of(record, self.pool)
            except (ConfigError, KeyError, TypeError, ValueError) as error:
                raise ConfigError(f"{label} has unreadable shards ({error})") from None
            # A running round is checked as an open is: before, a shard naming a worker past
            # --worker's count (the combiner restarted with fewer) failed in its collector, a
            # traceback and the round aborted; configs signed by another coordinator were
            # taken over. A finished round is not: its tombstone only answers for it (a shard
            # on a worker no longer listed answers as unknown), and refusing it would leave an
            # operator who shrank --worker only the choice of dropping every round's record.
            held = record.held and time.time() < record.finished_at + self.limits.result_ttl_s
            fetch_again = held and not (record.delivered or record.dropped)
            if not record.state or fetch_again:
                try:
                    if unlisted:
                        index, address = next(iter(unlisted.items()))
                        listed = ", ".join(w.spec.control_address for w in self.pool.workers)
                        raise ConfigError(f"shard {index} runs on the worker {address}, which "
                                          f"--worker no longer lists ({listed})")
                    self._check(record.round_id, [Placement(s.signed, s.worker) for s in shards])
                except (AuthenticationError, ConfigError) as error:
                    if fetch_again:  # (the total is lost, as a finished round's record stays)
                        fetch_again = False
                    else:
                        raise ConfigError(
                            f"{label} does not fit this combiner ({error}); start it with the "
                            "coordinator key and --worker list the round opened with, or move "
                            "the file away to start without the record of earlier rounds"
                        ) from None
            if record.state and not fetch_again:
                self._tombstones.bury(record.round_id, _tombstone_of(record, shards),
                                      prune=False)
                if held:
                    # A combiner stopped between this line and its word to the workers
                    # (``_let_go``) left their shard sums held until their --result-ttl, as
                    # did a total lost here (its record no longer fits). Told again: a worker
                    # that holds nothing of it answers without harm.
                    self._let_go_held(record.round_id, shards, record.released_shards
                                      if record.delivered else ())
                continue
            round_ = self._new_round(record.round_id, shards)
            if fetch_again:
                round_.take_over_released(record.contributors, record.released_shards,
                                          record.lost_shards)
                if record.released_shards is not None:
                    # (the shards given up on before the release: their workers may hold
                    # the sums they released all the same, never to be read)
                    self._let_go_held(record.round_id, [
                        s for s in shards if s.index not in record.released_shards], ())
            # Its workers accepted every shard before the coordinator heard of the round:
            # one that has no record of its shard now lost it (``Shard.opened``). Before, a
            # taken-over shard never counted as accepted, and one whose worker had also lost
            # its journal dropped out free.
            for shard in shards:
                shard.opened = record.shards_opened
            if record.unmask_started:
                round_.observe_unmask()  # (already journaled; shards will say it again)
            self._rounds[record.round_id] = round_
            round_.start()
            log.info("sharded round taken over after a restart", extra={
                "round_id": round_label(record.round_id), "shards": len(shards),
                "released_before": fetch_again})
        self._tombstones.prune()
        self.journal.rewrite()

    # -- opening -------------------------------------------------------------------------------

    async def open(self, round_id: bytes, placements: list[Placement]
                   ) -> tuple[CombinedRound, bool]:
        shards = self._check(check_round_id(round_id), placements)
        plan = [(s.signed, s.worker) for s in shards]
        existing = self.retried_open(
            round_id, lambda round_: [(s.signed, s.worker) for s in round_.shards] == plan,
            "plan", [(s.config, f"shard {s.index}") for s in shards], self.limits.max_round_s)
        if existing is not None:
            return existing, False
        if len(self._rounds) >= self.limits.max_rounds:
            raise CapacityError(f"the combiner already holds {self.limits.max_rounds} rounds")
        round_ = self._new_round(round_id, shards)
        self._rounds[round_id] = round_
        if self.journal is not None:
            try:
                await self.journal.opened(round_id, round_.session_id,
                                          _detail(shards, self.pool))
            except OSError as error:
                del self._rounds[round_id]
                self.journal.records.pop(round_id, None)
                raise JournalError(f"the combiner cannot record the round: {error}") from None
        failure = await self._open_shards(round_)
        if failure is not None:
            round_.state = RoundState.ABORTED
            round_.abort_reason = f"a shard could not open: {failure}"
            round_.finished.set()
            self._finished(round_, RoundState.ABORTED)
            self.forget(round_, "it could not open")
            raise StateError(f"round {round_label(round_id)!r} could not open: {failure}")
        round_.start()
        log.info("sharded round opened", extra={
            "round_id": round_label(round_id), "shards": len(shards),
            "devices": sum(s.config.num_devices for s in shards),
            "workers": sorted({s.worker for s in shards})})
        return round_, True

    def _check(self, round_id: bytes, placements: list[Placement]) -> list[Shard]:
        if not 1 <= len(placements) <= MAX_SHARDS:
            raise ConfigError(f"a sharded round has 1..{MAX_SHARDS} shards, got "
                              f"{len(placements)}")
        shards: list[Shard] = []
        seen = {round_id}
        for index, placement in enumerate(placements):
            if not ed25519_verify(self.coordinator_public, placement.signed.signature,
                                  placement.signed.payload):
                raise AuthenticationError(f"shard {index}'s config is not signed by the "
                                          "coordinator")
            config = RoundConfig.from_bytes(placement.signed.payload)
            if not (config.device_auth and config.consistency_check):
                raise ConfigError(f"shard {index} needs device_auth and the consistency check "
                                  "(the coordinator verifies its contributors)")
            if config.round_id in seen:
                raise ConfigError(f"shard {index} repeats the round id "
                                  f"{round_label(config.round_id)!r}")
            seen.add(config.round_id)
            if config.dimension != (shards[0].config.dimension if shards else config.dimension):
                raise ConfigError(f"shard {index} has dimension {config.dimension}, shard 0 "
                                  f"{shards[0].config.dimension}")
            if not 0 <= placement.worker < len(self.pool):
                raise ConfigError(f"shard {index} names worker {placement.worker}; there are "
                                  f"{len(self.pool)}")
            shards.append(Shard(index, placement.signed, config, placement.worker))
        return shards

    async def _open_shards(self, round_: CombinedRound) -> str | None:
        """Open every shard on its worker; on the first failure cancel the rest. Returns the
        failure, or None."""
        async def open_one(shard: Shard) -> str | None:
            try:
                await self.pool[shard.worker].control.open_round(shard.signed)
            except (grpc.aio.AioRpcError, FedhhError) as error:
                what = error.code().name if isinstance(error, grpc.aio.AioRpcError) else error
                return f"{round_label(shard.round_id)} on worker {shard.worker}: {what}"
            shard.opened = True
            return None

        failures = [f for f in await asyncio.gather(*(open_one(s) for s in round_.shards)) if f]
        if not failures and self.journal is not None:
            # On disk before the coordinator is told the round opened (and so before any
            # device has its task): a restarted combiner reads a worker's lost record of a
            # shard as such, not as a shard that never reached it (``restore``).
            try:
                await self.journal.shards_opened(round_.round_id)
            except OSError as error:
                failures.append(f"the combiner cannot record that its shards opened: {error}")
        if not failures:
            return None

        async def cancel_one(shard: Shard) -> None:
            with contextlib.suppress(grpc.aio.AioRpcError, FedhhError):
                await self.pool[shard.worker].control.cancel(shard.round_id)

        await asyncio.gather(*(cancel_one(s) for s in round_.shards))
        for shard in round_.shards:
            shard.state, shard.reason = RoundState.ABORTED, "the round could not open"
        return failures[0]

    def _new_round(self, round_id: bytes, shards: list[Shard]) -> CombinedRound:
        return CombinedRound(round_id, shards, self.pool, self.limits, self._finished,
                             self._unmask_seen, self._expired, self._letting_go)

    # -- lookups -------------------------------------------------------------------------------

    def outcome(self, round_id: bytes) -> tuple[RecordedOutcome, tuple[Shard, ...]] | None:
        """What became of the round as far as the combiner itself knows (a running round's
        live stage comes from its workers: the servicer asks them); None: no record."""
        round_ = self._rounds.get(round_id)
        if round_ is not None:
            state = {RoundState.RUNNING: OutcomeState.RUNNING,
                     RoundState.ABORTED: OutcomeState.ABORTED,
                     RoundState.RELEASED: OutcomeState.RELEASED}[round_.state]
            return RecordedOutcome(state, round_.session_id, None, round_.reached_unmask,
                           round_.abort_reason, False, round_.total is not None,
                           round_.contributors), tuple(round_.shards)
        self._tombstones.prune()
        tombstone = self._tombstones.get(round_id)
        return None if tombstone is None else (tombstone.outcome, tombstone.shards)

    # -- finishing and forgetting --------------------------------------------------------------

    def _finished(self, round_: CombinedRound, state: RoundState
                  ) -> concurrent.futures.Future[None] | None:
        if self.journal is None:
            return None
        if state != RoundState.RELEASED:
            return self.journal.finished(round_.round_id, state.value, round_.abort_reason,
                                         round_.reached_unmask, round_.contributors)
        out = [s for s in round_.shards if s.state != RoundState.RELEASED]
        return self.journal.finished(
            round_.round_id, state.value, round_.abort_reason, round_.reached_unmask,
            round_.contributors, held=True,
            shards=[s.index for s in round_.shards if s.state == RoundState.RELEASED],
            lost=[s.index for s in out if s.reached_unmask])

    def _unmask_seen(self, round_: CombinedRound) -> None:
        # (not again for a round whose record says so: one taken over after its release
        # says so at its restore, before the journal is open for writes)
        if self.journal is None:
            return
        record = self.journal.records.get(round_.round_id)
        if record is not None and not record.unmask_started:
            self.journal.unmask_observed(round_.round_id)

    def forget(self, round_: CombinedRound, why: str, *, delivered: bool = False) -> None:
        if self._rounds.get(round_.round_id) is not round_:
            return
        del self._rounds[round_.round_id]
        round_.stop()
        if round_.state == RoundState.RELEASED:
            self._let_go(round_, delivered)
        state = OutcomeState.RELEASED if round_.state == RoundState.RELEASED else \
            OutcomeState.ABORTED if round_.state == RoundState.ABORTED else OutcomeState.RUNNING
        outcome = RecordedOutcome(state, round_.session_id, None, round_.reached_unmask,
                          round_.abort_reason, delivered, False, round_.contributors)
        self._tombstones.bury(round_.round_id,
                              _Tombstone(outcome, why, time.time(), tuple(round_.shards)))

    def _let_go(self, round_: CombinedRound, delivered: bool) -> None:
        """Tell a forgotten released round's workers to drop their shard sums, once the
        journal says its total was delivered or dropped (a restart before then takes the round
        over and fetches them again)."""
        written: concurrent.futures.Future[None] | None = None
        if self.journal is not None:
            record = self.journal.delivered if delivered else self.journal.dropped
            written = record(round_.round_id)
        self._in_background(round_.round_id, round_.let_go(written, delivered=delivered))

    def _let_go_held(self, round_id: bytes, shards: list[Shard],
                     delivered: tuple[int, ...] | None) -> None:
        """Tell the workers of ``shards`` to drop the sums they may hold for the round, those
        of ``delivered`` (indices) as delivered, every other one not: also all of them where
        the record cannot say which shards made the delivered total (None: a line from before
        it did). Before, such a line had every shard's worker journal its sum delivered, also
        one given up on before the release, whose sum never was."""
        listed = [s for s in shards if s.worker < len(self.pool)]
        told = () if delivered is None else delivered
        patience_s = self.limits.result_ttl_s
        self._in_background(round_id, drop_held(self.pool, [
            s for s in listed if s.index in told], delivered=True, patience_s=patience_s))
        self._in_background(round_id, drop_held(self.pool, [
            s for s in listed if s.index not in told], delivered=False, patience_s=patience_s))

    def _in_background(self, round_id: bytes, telling: Coroutine[Any, Any, None]) -> None:
        """Run ``telling`` (the round's word to its workers) in a task kept till it ends."""
        task = asyncio.create_task(telling, name=f"shards of {round_label(round_id)}")
        self._letting_go.add(task)
        task.add_done_callback(self._letting_go.discard)

    def close(self) -> None:
        """Stop collecting (the service stops). With a journal the shards run on and a
        restarted combiner takes them over; without one they are forgotten here (their workers
        expire them). The rounds' words to their workers end too: a worker not yet told
        drops its shard sum at its --result-ttl, and a released round's workers are told
        again by the next process (``restore``). Before, they were tried on for the
        combiner's --result-ttl, past the stop, into the pool's closed channels."""
        for round_ in list(self._rounds.values()):
            round_.stop()
        for task in list(self._letting_go):
            task.cancel()
        if self.journal is not None:
            self.journal.close()


def _detail(shards: list[Shard], pool: WorkerPool) -> dict[str, Any]:
    """What the journal keeps of a round's shards: each one's signed config and its worker,
    by position in --worker's list and by control address (``_shards_of``)."""
    return {"shards": [{"config": s.signed.payload.hex(), "signature": s.signed.signature.hex(),
                        "worker": s.worker, "address": pool[s.worker].spec.control_address}
                       for s in shards]}


def _shards_of(record: RoundRecord, pool: WorkerPool) -> tuple[list[Shard], dict[int, str]]:
    """A journaled round's shards, each on its worker as --worker lists it now, found by its
    control address; and the shards (index: address) whose worker it no longer lists, given
    the index past the list (as a shrunk list's: GetOutcome does not ask). Before, a shard
    kept its position alone, so a list given in another order at a restart sent each shard's
    questions to another worker: a running round's collector asked a worker that never had
    it, and the round was lost. A record written before the address was kept has its
    position only."""
    if record.detail is None:
        raise ValueError("no shards recorded")
    shards, unlisted = [], {}
    where: dict[str, int] | None = None
    for index, entry in enumerate(record.detail["shards"]):
        signed = SignedConfig(bytes.fromhex(entry["config"]), bytes.fromhex(entry["signature"]))
        worker = int(entry["worker"])
        if "address" in entry:
            if where is None:
                where = {w.spec.control_address: w.index for w in pool.workers}
            address = str(entry["address"])
            worker = where.get(address, len(pool))
            if worker == len(pool):
                unlisted[index] = address
        shards.append(Shard(index, signed, RoundConfig.from_bytes(signed.payload), worker))
    if not shards:
        raise ValueError("no shards recorded")
    return shards, unlisted


def _tombstone_of(record: RoundRecord, shards: list[Shard]) -> _Tombstone:
    # The shards keep state RUNNING: the combiner no longer knows their outcomes, which are
    # their workers' to tell (GetOutcome asks them).
    outcome, why = recorded_outcome(record, CombinerRegistry.sum_name, "a combiner restart")
    return _Tombstone(outcome, why, record.finished_at, tuple(shards))

