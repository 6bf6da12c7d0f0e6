"""The server side of the control calls that the aggregator and the combiner both answer: the
handlers' values (``fedhh_aggregator.control``) as messages.

A GetResult stream is the header, then (released) every evidence part, then the sum in chunks
of ``CHUNK_BYTES``: the coordinator checks the evidence and records the spend before it reads a
byte of the sum.
"""

from __future__ import annotations

from typing import Any

import grpc

from fedhh.rpc.aggregator_wire import CHUNK_BYTES, evidence_parts, stage_to_pb
from fedhh.rpc.control_client import outcome_view_from_pb
from fedhh.rpc.errors import status_errors
from fedhh.secagg.prg import mask_dtype
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator.auth import ControlAuth
from fedhh_aggregator.combined import Shard
from fedhh_aggregator.control import ControlHandler, ResultReport
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome, ShardOutcome
from fedhh_aggregator.rounds import RoundState, check_round_id

__all__ = ["STATE_TO_PB", "ControlCalls", "outcome_to_pb", "write_result"]

STATE_TO_PB = {
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


class ControlCalls:
    """GetResult, CancelRound and GetOutcome, for a servicer of AggregatorControl or
    CombinerControl (listed first among its bases): each checks the bearer token, parses the
    round id and hands the call to the service's :class:`ControlHandler`."""

    def __init__(self, control: ControlHandler[Any], auth: ControlAuth) -> None:
        self._control = control
        self._auth = auth

    @status_errors
    async def GetResult(self, request: pb.GetResultRequest,
                        context: grpc.aio.ServicerContext) -> None:
        self._auth.check(context)
        await self._control.get_result(check_round_id(request.round_id), request.wait_ms / 1000,
                                       lambda report: write_result(context, report),
                                       hold=request.hold)

    @status_errors
    async def CancelRound(self, request: pb.CancelRoundRequest,
                          context: grpc.aio.ServicerContext) -> pb.CancelRoundResponse:
        self._auth.check(context)
        state = await self._control.cancel(check_round_id(request.round_id),
                                           delivered=request.delivered)
        return pb.CancelRoundResponse(state=STATE_TO_PB[state])

    @status_errors
    async def GetOutcome(self, request: pb.GetOutcomeRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetOutcomeResponse:
        self._auth.check(context)
        round_id = check_round_id(request.round_id)
        if not request.HasField("seen"):
            return outcome_to_pb(await self._control.outcome(round_id), self._control.durable)
        outcome = await self._control.watch(round_id, outcome_view_from_pb(request.seen),
                                            request.wait_ms / 1000)
        response = outcome_to_pb(outcome, self._control.durable)
        response.watched = True
        return response


async def write_result(context: grpc.aio.ServicerContext, report: ResultReport) -> None:
    """Stream ``report`` as GetResult's ResultChunks."""
    header = pb.ResultHeader(state=STATE_TO_PB[report.state], round_id=report.round_id,
                             session_id=report.session_id, dimension=report.dimension,
                             modulus_bits=report.modulus_bits,
                             reached_unmask=report.reached_unmask,
                             abort_reason=report.abort_reason,
                             shards=[_shard_result(s) for s in report.shards])
    if report.total is None:
        await context.write(pb.ResultChunk(header=header))
        return
    data = report.total.astype(mask_dtype(report.modulus_bits), copy=False).tobytes()
    header.num_contributors = report.num_contributors
    header.total_bytes = len(data)
    header.survivor_count = sum(len(e.survivors) for e in report.evidence)
    header.signature_count = sum(len(e.signatures) for e in report.evidence)
    await context.write(pb.ResultChunk(header=header))
    for evidence in report.evidence:
        for part in evidence_parts(evidence.survivors, evidence.signatures):
            part.shard = evidence.shard
            await context.write(pb.ResultChunk(evidence=part))
    for offset in range(0, len(data), CHUNK_BYTES):
        await context.write(pb.ResultChunk(data=data[offset:offset + CHUNK_BYTES]))


def _shard_result(shard: Shard) -> pb.ShardResult:
    released = shard.state == RoundState.RELEASED
    return pb.ShardResult(
        round_id=shard.round_id, state=STATE_TO_PB[shard.state],
        reached_unmask=shard.reached_unmask, abort_reason="" if released else shard.reason,
        num_contributors=shard.contributors if released else 0,
        survivor_count=len(shard.survivors) if released else 0,
        signature_count=len(shard.signatures) if released else 0)


def outcome_to_pb(outcome: RecordedOutcome, durable: bool) -> pb.GetOutcomeResponse:
    response = pb.GetOutcomeResponse(
        state=_OUTCOME[outcome.state], session_id=outcome.session_id,
        reached_unmask=outcome.reached_unmask, abort_reason=outcome.abort_reason,
        delivered=outcome.delivered, sum_available=outcome.sum_available,
        num_contributors=outcome.num_contributors, durable=durable,
        stage_devices=[pb.StageCount(stage=stage_to_pb(stage), devices=count)
                       for stage, count in outcome.stage_devices],
        shards=[_shard_outcome(s) for s in outcome.shards])
    if outcome.stage is not None:
        response.stage = stage_to_pb(outcome.stage)
    if outcome.declined is not None:
        response.declined = outcome.declined
    return response


def _shard_outcome(shard: ShardOutcome) -> pb.ShardOutcome:
    message = pb.ShardOutcome(
        round_id=shard.round_id, worker=shard.worker, state=_OUTCOME[shard.state],
        reached_unmask=shard.reached_unmask, abort_reason=shard.abort_reason,
        num_contributors=shard.num_contributors)
    if shard.stage is not None:
        message.stage = stage_to_pb(shard.stage)
    if shard.declined is not None:
        message.declined = shard.declined
    return message
