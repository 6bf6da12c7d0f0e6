"""fedhh.v1.CombinerControl: the coordinator's calls to the combiner (bearer token on each).

Transport only: requests become :class:`~fedhh_aggregator.combiner.Placement` lists and round
ids, outcomes become ``ResultChunk`` streams and ``GetOutcomeResponse`` messages; every domain
error becomes a status code in ``fedhh.rpc.errors.status_errors``.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc

from fedhh.errors import ConfigError, FedhhError, StateError
from fedhh.rpc.aggregator_client import RoundOutcome
from fedhh.rpc.aggregator_wire import CHUNK_BYTES, evidence_parts, stage_to_pb
from fedhh.rpc.errors import status_errors
from fedhh.secagg import SignedConfig, Stage, session_id_of
from fedhh.secagg.prg import mask_dtype
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator import metrics
from fedhh_aggregator.auth import ControlAuth
from fedhh_aggregator.combined import Shard
from fedhh_aggregator.combiner import CombinerRegistry, Placement
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome
from fedhh_aggregator.rounds import RoundState

_STATE = {
    RoundState.RUNNING: pb.AGGREGATION_STATE_RUNNING,
    RoundState.RELEASED: pb.AGGREGATION_STATE_RELEASED,
    RoundState.ABORTED: pb.AGGREGATION_STATE_ABORTED,
}
_OUTCOME = {
    OutcomeState.UNKNOWN: pb.OUTCOME_STATE_UNKNOWN,
    OutcomeState.RUNNING: pb.OUTCOME_STATE_RUNNING,
    OutcomeState.ABORTED: pb.OUTCOME_STATE_ABORTED,
    OutcomeState.RELEASED: pb.OUTCOME_STATE_RELEASED,
}
_MAX_ROUND_ID_BYTES = 64


class CombinerServicer(pb_grpc.CombinerControlServicer):
    def __init__(self, registry: CombinerRegistry, auth: ControlAuth) -> None:
        self._registry = registry
        self._auth = auth

    @status_errors
    async def DescribeWorkers(self, request: pb.DescribeWorkersRequest,
                              context: grpc.aio.ServicerContext) -> pb.DescribeWorkersResponse:
        self._auth.check(context)
        described = await self._registry.pool.describe()
        return pb.DescribeWorkersResponse(workers=[
            pb.WorkerInfo(index=w.index, public_address=w.spec.public_address, serving=serving)
            for w, serving in described])

    @status_errors
    async def OpenShardedRound(self, request: pb.OpenShardedRoundRequest,
                               context: grpc.aio.ServicerContext) -> pb.OpenShardedRoundResponse:
        self._auth.check(context)
        placements = [Placement(SignedConfig(bytes(s.config), bytes(s.signature)), s.worker)
                      for s in request.shards]
        round_, created = await self._registry.open(_round_id(request.round_id), placements)
        return pb.OpenShardedRoundResponse(
            created=created, session_ids=[session_id_of(s.config) for s in round_.shards])

    @status_errors
    async def GetResult(self, request: pb.GetResultRequest,
                        context: grpc.aio.ServicerContext) -> None:
        self._auth.check(context)
        round_ = self._registry.by_round(_round_id(request.round_id))
        state = await round_.wait_finished(request.wait_ms / 1000)
        header = pb.ResultHeader(state=_STATE[state], round_id=round_.round_id,
                                 session_id=round_.session_id, dimension=round_.dimension,
                                 modulus_bits=round_.modulus_bits,
                                 reached_unmask=round_.reached_unmask)
        if state == RoundState.RUNNING:
            await context.write(pb.ResultChunk(header=header))
            return
        header.shards.extend(_shard_result(s) for s in round_.shards)
        if state == RoundState.ABORTED:
            header.abort_reason = round_.abort_reason
            await context.write(pb.ResultChunk(header=header))
            self._registry.forget(round_, "its abort was reported to the coordinator")
            metrics.COMBINED_ROUNDS.labels("aborted").inc()
            return
        total = round_.total
        if total is None:
            raise StateError("the total was already delivered")
        data = total.astype(mask_dtype(round_.modulus_bits)).tobytes()
        released = [s for s in round_.shards if s.state == RoundState.RELEASED]
        header.num_contributors = round_.contributors
        header.total_bytes = len(data)
        header.survivor_count = sum(len(s.survivors) for s in released)
        header.signature_count = sum(len(s.signatures) for s in released)
        await context.write(pb.ResultChunk(header=header))
        # Every released shard's evidence before a byte of the total (the coordinator checks
        # each against its shard's config and records the spend first).
        for shard in released:
            for part in evidence_parts(shard.survivors, shard.signatures):
                part.shard = shard.index
                await context.write(pb.ResultChunk(evidence=part))
        for offset in range(0, len(data), CHUNK_BYTES):
            await context.write(pb.ResultChunk(data=data[offset:offset + CHUNK_BYTES]))
        self._registry.forget(round_, "the total was delivered to the coordinator",
                              delivered=True)
        metrics.COMBINED_ROUNDS.labels("delivered").inc()

    @status_errors
    async def CancelRound(self, request: pb.CancelRoundRequest,
                          context: grpc.aio.ServicerContext) -> pb.CancelRoundResponse:
        self._auth.check(context)
        state = await self._registry.cancel(_round_id(request.round_id))
        return pb.CancelRoundResponse(state=_STATE[state])

    @status_errors
    async def GetOutcome(self, request: pb.GetOutcomeRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetOutcomeResponse:
        self._auth.check(context)
        round_id = _round_id(request.round_id)
        known = self._registry.outcome(round_id)
        durable = self._registry.durable
        if known is None:
            return pb.GetOutcomeResponse(state=pb.OUTCOME_STATE_UNKNOWN, durable=durable)
        outcome, shards = known
        live = await self._shard_outcomes(round_id, outcome, shards)
        response = _outcome_to_pb(outcome, durable)
        running: list[Stage] = []
        counts: dict[Stage, int] = {}
        for shard, seen in zip(shards, live, strict=True):
            response.shards.append(_shard_outcome(shard, seen))
            if seen is not None:
                if seen.state == "running" and seen.stage is not None:
                    running.append(seen.stage)
                for stage, n in seen.stage_devices:
                    counts[stage] = counts.get(stage, 0) + n
                if seen.reached_unmask and not response.reached_unmask:
                    response.reached_unmask = True
        if outcome.state == OutcomeState.RUNNING and running:
            response.stage = stage_to_pb(min(running))
        response.stage_devices.extend(pb.StageCount(stage=stage_to_pb(stage), devices=n)
                                      for stage, n in sorted(counts.items()))
        return response

    async def _shard_outcomes(self, round_id: bytes, outcome: RecordedOutcome,
                              shards: tuple[Shard, ...]) -> list[RoundOutcome | None]:
        """Each shard's outcome at its worker: asked of every shard of a running round (for the
        live stage), and of the shards whose outcome a restarted combiner no longer holds."""
        with contextlib.suppress(FedhhError):
            round_ = self._registry.by_round(round_id)
            if outcome.state == OutcomeState.RUNNING:
                return await round_.live_outcomes()
        unknown = [s if s.state == RoundState.RUNNING else None for s in shards]
        return await _ask_some(self._registry, unknown)


async def _ask_some(registry: CombinerRegistry, shards: list[Shard | None]
                    ) -> list[RoundOutcome | None]:
    async def ask(shard: Shard | None) -> RoundOutcome | None:
        if shard is None:
            return None
        with contextlib.suppress(grpc.aio.AioRpcError, FedhhError):
            return await registry.pool[shard.worker].control.outcome(shard.round_id)
        return None

    return list(await asyncio.gather(*(ask(s) for s in shards)))


def _round_id(raw: bytes) -> bytes:
    round_id = bytes(raw)
    if not 1 <= len(round_id) <= _MAX_ROUND_ID_BYTES:
        raise ConfigError(f"round_id must be 1..{_MAX_ROUND_ID_BYTES} bytes, got {len(round_id)}")
    return round_id


def _shard_result(shard: Shard) -> pb.ShardResult:
    released = shard.state == RoundState.RELEASED
    return pb.ShardResult(
        round_id=shard.round_id, state=_STATE[shard.state], reached_unmask=shard.reached_unmask,
        abort_reason="" if released else shard.reason,
        num_contributors=shard.contributors if released else 0,
        survivor_count=len(shard.survivors) if released else 0,
        signature_count=len(shard.signatures) if released else 0)


def _shard_outcome(shard: Shard, seen: RoundOutcome | None) -> pb.ShardOutcome:
    """A shard's outcome: the worker's word when asked, else the combiner's own record."""
    message = pb.ShardOutcome(round_id=shard.round_id, worker=shard.worker)
    if seen is not None:
        message.state = pb.OutcomeState.Value(f"OUTCOME_STATE_{seen.state.upper()}")
        if seen.stage is not None:
            message.stage = stage_to_pb(seen.stage)
        message.reached_unmask = seen.reached_unmask or shard.reached_unmask
        message.abort_reason = seen.abort_reason
        message.num_contributors = seen.num_contributors
        return message
    message.state = {RoundState.RUNNING: pb.OUTCOME_STATE_UNKNOWN,
                     RoundState.RELEASED: pb.OUTCOME_STATE_RELEASED,
                     RoundState.ABORTED: pb.OUTCOME_STATE_ABORTED}[shard.state]
    message.reached_unmask = shard.reached_unmask
    message.abort_reason = shard.reason
    message.num_contributors = shard.contributors
    return message


def _outcome_to_pb(outcome: RecordedOutcome, durable: bool) -> pb.GetOutcomeResponse:
    return pb.GetOutcomeResponse(
        state=_OUTCOME[outcome.state], session_id=outcome.session_id,
        reached_unmask=outcome.reached_unmask, abort_reason=outcome.abort_reason,
        delivered=outcome.delivered, sum_available=outcome.sum_available,
        num_contributors=outcome.num_contributors, durable=durable)
