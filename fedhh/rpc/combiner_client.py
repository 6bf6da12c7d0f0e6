"""The coordinator's client of the combiner (``fedhh.v1.CombinerControl``, docs/scaling.md).

::

    combiner = CombinerControl(channel, token)
    workers = await combiner.workers()   # [WorkerInfo(index, public_address, serving)]
    await combiner.open_round(round_id, [(signed_shard_config, worker_index), ...])
    result = await combiner.result(round_id, timeout, on_release=hook)
    # hook(shards: list[ShardRelease]) runs once every shard's evidence is in, before a byte of
    # the total is read: check it (fedhh.secagg.shards.verify_sharded_release), record the
    # spend, or raise to refuse the total (then cancel the round to drop it)
    outcome = await combiner.outcome(round_id)         # RoundOutcome, with .shards

Errors as :class:`~fedhh.rpc.aggregator_client.AggregatorControl`: the ``fedhh.errors`` class of
the status code, :class:`~fedhh.rounds.RoundAborted` for an aborted round,
``TimeoutError``, or ``grpc.aio.AioRpcError`` for transport failures (UNIMPLEMENTED: the
address is a plain aggregator, not a combiner).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np

from fedhh.rpc.aggregator_client import (
    AggregatorError,
    RoundAborted,
    RoundOutcome,
    domain_error,
    stage_counts,
)
from fedhh.rpc.aggregator_wire import stage_from_pb
from fedhh.secagg import ReleaseEvidence, SignedConfig
from fedhh.secagg.config import MAX_COHORT
from fedhh.secagg.prg import mask_dtype
from fedhh.secagg.shards import MAX_SHARDS, ShardRelease
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

__all__ = ["CombinedOutcome", "CombinedResult", "CombinerControl", "ShardState", "WorkerInfo"]

_SERVER_WAIT_CAP_S = 30.0
ShardsHook = Callable[[list[ShardRelease]], Awaitable[None]]


@dataclass(frozen=True)
class WorkerInfo:
    index: int
    public_address: str
    serving: bool


@dataclass(frozen=True)
class CombinedResult:
    round_id: bytes
    total: np.ndarray
    num_contributors: int  # the sum of the released shards' |U3|
    shards: tuple[ShardRelease, ...]


@dataclass(frozen=True)
class ShardState:
    round_id: bytes
    worker: int
    state: str  # "unknown", "running", "aborted" or "released"
    reached_unmask: bool
    abort_reason: str
    num_contributors: int


@dataclass(frozen=True)
class CombinedOutcome:
    outcome: RoundOutcome
    shards: tuple[ShardState, ...]


class CombinerControl:
    def __init__(self, channel: grpc.aio.Channel, token: str | bytes, *,
                 call_timeout: float = 30.0) -> None:
        text = token.decode() if isinstance(token, bytes) else token
        self._stub = pb_grpc.CombinerControlStub(channel)
        self._metadata = (("authorization", f"Bearer {text}"),)
        self._call_timeout = call_timeout

    async def workers(self) -> list[WorkerInfo]:
        """The combiner's workers; raises ``grpc.aio.AioRpcError`` (UNIMPLEMENTED from a
        plain aggregator)."""
        response = await self._stub.DescribeWorkers(pb.DescribeWorkersRequest(),
                                                    metadata=self._metadata,
                                                    timeout=self._call_timeout)
        return [WorkerInfo(int(w.index), w.public_address, w.serving) for w in response.workers]

    async def open_round(self, round_id: bytes,
                         shards: Sequence[tuple[SignedConfig, int]]) -> list[bytes]:
        """Open every shard on its worker (all or nothing); returns their session ids. Opening
        the same plan again is a no-op."""
        request = pb.OpenShardedRoundRequest(round_id=round_id, shards=[
            pb.ShardPlacement(config=s.payload, signature=s.signature, worker=w)
            for s, w in shards])
        try:
            response = await self._stub.OpenShardedRound(request, metadata=self._metadata,
                                                         timeout=self._call_timeout)
        except grpc.aio.AioRpcError as error:
            raise domain_error(error) from error
        return [bytes(s) for s in response.session_ids]

    async def result(self, round_id: bytes, timeout: float,
                     on_release: ShardsHook | None = None) -> CombinedResult:
        """Wait up to ``timeout`` seconds for the round's total (module docstring)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while True:
            wait_ms = int(min(max(0.0, until - loop.time()), _SERVER_WAIT_CAP_S) * 1000)
            call = self._stub.GetResult(pb.GetResultRequest(round_id=round_id, wait_ms=wait_ms),
                                        metadata=self._metadata,
                                        timeout=wait_ms / 1000 + self._call_timeout)
            try:
                result = await _read_combined(call, on_release)
            except grpc.aio.AioRpcError as error:
                raise domain_error(error) from error
            except BaseException:
                call.cancel()
                raise
            if result is not None:
                return result
            if loop.time() >= until:
                raise TimeoutError(f"round {round_id!r} still running after {timeout} s")

    async def outcome(self, round_id: bytes) -> CombinedOutcome:
        try:
            r = await self._stub.GetOutcome(pb.GetOutcomeRequest(round_id=round_id),
                                            metadata=self._metadata, timeout=self._call_timeout)
        except grpc.aio.AioRpcError as error:
            raise domain_error(error) from error
        state = _outcome_state(r.state)
        outcome = RoundOutcome(state, bytes(r.session_id), stage_from_pb(r.stage),
                               r.reached_unmask, r.abort_reason, r.delivered, r.sum_available,
                               int(r.num_contributors), r.durable,
                               stage_counts(r.stage_devices))
        shards = tuple(ShardState(bytes(s.round_id), int(s.worker), _outcome_state(s.state),
                                  s.reached_unmask, s.abort_reason, int(s.num_contributors))
                       for s in r.shards)
        return CombinedOutcome(outcome, shards)

    async def cancel(self, round_id: bytes) -> str:
        try:
            response = await self._stub.CancelRound(pb.CancelRoundRequest(round_id=round_id),
                                                    metadata=self._metadata,
                                                    timeout=self._call_timeout)
        except grpc.aio.AioRpcError as error:
            raise domain_error(error) from error
        return pb.AggregationState.Name(response.state).removeprefix("AGGREGATION_STATE_").lower()


def _outcome_state(value: int) -> str:
    state = pb.OutcomeState.Name(value).removeprefix("OUTCOME_STATE_").lower()
    if state == "unspecified":
        raise AggregatorError("GetOutcome answered without a state")
    return state


async def _read_combined(call: Any, on_release: ShardsHook | None) -> CombinedResult | None:
    """One GetResult stream of a sharded round: header; if released, each released shard's
    evidence, then the total. ``on_release`` gets every shard once all evidence is in."""
    header: pb.ResultHeader | None = None
    survivors: dict[int, list[int]] = {}
    signatures: dict[int, list[tuple[int, bytes]]] = {}
    shards: list[ShardRelease] | None = None
    buffer = bytearray()
    expected = received = 0

    def complete(announced: pb.ResultHeader) -> bool:
        return all(len(survivors.get(j, ())) == s.survivor_count
                   and len(signatures.get(j, ())) == s.signature_count
                   for j, s in enumerate(announced.shards))

    async for chunk in call:
        part = chunk.WhichOneof("part")
        if header is None:
            if part != "header":
                raise AggregatorError("the result stream must start with its header")
            header = chunk.header
            if header.state == pb.AGGREGATION_STATE_RUNNING:
                return None
            if not 1 <= len(header.shards) <= MAX_SHARDS:
                raise AggregatorError("a sharded result must list its shards")
            if header.state == pb.AGGREGATION_STATE_ABORTED:
                raise RoundAborted(header.abort_reason or "unknown reason",
                                   reached_unmask=header.reached_unmask)
            if header.state != pb.AGGREGATION_STATE_RELEASED or header.modulus_bits not in (16, 32):
                raise AggregatorError(f"unexpected result header (state {header.state})")
            expected = header.dimension * header.modulus_bits // 8
            if header.total_bytes != expected:
                raise AggregatorError("the result's length does not match its dimension")
            for s in header.shards:
                if s.survivor_count > MAX_COHORT or s.signature_count > MAX_COHORT:
                    raise AggregatorError("a shard announces more survivors than any cohort")
                if s.state != pb.AGGREGATION_STATE_RELEASED and (s.survivor_count
                                                                 or s.signature_count):
                    raise AggregatorError("evidence announced for a shard that did not release")
        elif part == "evidence":
            j = chunk.evidence.shard
            if shards is not None or j >= len(header.shards):
                raise AggregatorError("the result stream holds more evidence than announced")
            survivors.setdefault(j, []).extend(chunk.evidence.survivors)
            signatures.setdefault(j, []).extend((int(s.device_id), bytes(s.signature))
                                                for s in chunk.evidence.signatures)
            announced = header.shards[j]
            if (len(survivors[j]) > announced.survivor_count
                    or len(signatures[j]) > announced.signature_count):
                raise AggregatorError("the result stream holds more evidence than announced")
        elif part == "data":
            if shards is None:
                raise AggregatorError("the total came before the evidence of its contributors")
            data = chunk.data
            if received + len(data) > expected:
                raise AggregatorError("the result stream holds more than the declared total")
            buffer[received:received + len(data)] = data
            received += len(data)
            continue
        else:
            raise AggregatorError(f"unexpected part {part!r} in the result stream")
        if shards is None and complete(header):
            shards = [
                ShardRelease(bytes(s.round_id), s.state == pb.AGGREGATION_STATE_RELEASED,
                             s.reached_unmask,
                             ReleaseEvidence(tuple(survivors.get(j, ())),
                                             tuple(signatures.get(j, ())),
                                             int(s.num_contributors))
                             if s.state == pb.AGGREGATION_STATE_RELEASED else None,
                             s.abort_reason)
                for j, s in enumerate(header.shards)]
            if on_release is not None:
                await on_release(shards)
            buffer = bytearray(expected)
    if header is None or shards is None or received != expected:
        raise AggregatorError("the result stream ended early")
    dtype = mask_dtype(header.modulus_bits)
    total = np.frombuffer(buffer, dtype=dtype).astype(dtype.newbyteorder("="), copy=False)
    return CombinedResult(bytes(header.round_id), total, int(header.num_contributors),
                          tuple(shards))
