"""The coordinator's client of the combiner (``fedhh.v1.CombinerControl``, docs/scaling.md).

::

    combiner = CombinerControl(channel, token)
    workers = await combiner.workers()   # [WorkerInfo(index, public_address, serving, ...)]
    await combiner.open_round(round_id, [(signed_shard_config, worker_index), ...])
    result = await combiner.result(round_id, timeout, on_release=hook)
    # hook(shards: list[ShardRelease]) runs once every shard's evidence is in, before a byte of
    # the total is read: check it (fedhh.secagg.shards.verify_sharded_release), record the
    # spend, or raise to refuse the total (then cancel the round to drop it)
    outcome = await combiner.outcome(round_id)         # RoundOutcome, with .shards

Errors as :class:`~fedhh.rpc.aggregator_client.AggregatorControl` (the calls they share:
``fedhh.rpc.control_client``): the ``fedhh.errors`` class of the status code,
:class:`~fedhh.errors.RoundAborted` for an aborted round, ``TimeoutError``, or
``grpc.aio.AioRpcError`` for transport failures (UNIMPLEMENTED: the address is a plain
aggregator, not a combiner).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import grpc
import numpy as np

from fedhh.rpc.aggregator_client import checked_stream
from fedhh.rpc.control_client import (
    CALL_TIMEOUT_S,
    ControlClient,
    OutcomeView,
    RoundOutcome,
    outcome_from_pb,
    outcome_state,
    read_result_stream,
)
from fedhh.secagg import ReleaseEvidence, SignedConfig
from fedhh.secagg.shards import ShardRelease
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

__all__ = ["CombinedOutcome", "CombinedResult", "CombinerControl", "ShardState", "WorkerInfo"]

ShardsHook = Callable[[list[ShardRelease]], Awaitable[None]]


@dataclass(frozen=True)
class WorkerInfo:
    index: int
    public_address: str
    serving: bool
    web_url: str = ""
    session_address: str = ""


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


class CombinerControl(ControlClient):
    def __init__(self, channel: grpc.aio.Channel, token: str | bytes, *,
                 call_timeout: float = CALL_TIMEOUT_S) -> None:
        super().__init__(pb_grpc.CombinerControlStub(channel), token, call_timeout)

    async def workers(self) -> list[WorkerInfo]:
        """The combiner's workers; raises ``grpc.aio.AioRpcError`` (UNIMPLEMENTED from a
        plain aggregator)."""
        response = await self._stub.DescribeWorkers(pb.DescribeWorkersRequest(),
                                                    metadata=self._metadata,
                                                    timeout=self._call_timeout)
        return [WorkerInfo(int(w.index), w.public_address, w.serving, w.web_url,
                           w.session_address)
                for w in response.workers]

    async def open_round(self, round_id: bytes,
                         shards: Sequence[tuple[SignedConfig, int]]) -> list[bytes]:
        """Open every shard on its worker (all or nothing); returns their session ids. Opening
        the same plan again is a no-op."""
        request = pb.OpenShardedRoundRequest(round_id=round_id, shards=[
            pb.ShardPlacement(config=s.payload, signature=s.signature, worker=w)
            for s, w in shards])
        response = await self._unary(self._stub.OpenShardedRound, request)
        return [bytes(s) for s in response.session_ids]

    async def result(self, round_id: bytes, timeout: float,
                     on_release: ShardsHook | None = None, *,
                     dimension: int | None = None, hold: bool = False) -> CombinedResult:
        """Wait up to ``timeout`` seconds for the round's total (module docstring); an answer
        of another round, or a total of another ``dimension`` (when given), is refused:
        :class:`~fedhh.rpc.aggregator_client.ReleaseMismatch`. ``hold``: as
        ``AggregatorControl.result``'s."""
        return await self._result(round_id, timeout, partial(
            _read_combined, on_release=on_release, round_id=round_id, dimension=dimension),
            hold)

    async def outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                      wait_s: float = 0.0) -> CombinedOutcome:
        """As ``AggregatorControl.outcome``, with each shard's outcome."""
        r = await self._outcome(round_id, seen, wait_s)
        shards = tuple(ShardState(bytes(s.round_id), int(s.worker), outcome_state(s.state),
                                  s.reached_unmask, s.abort_reason, int(s.num_contributors))
                       for s in r.shards)
        return CombinedOutcome(outcome_from_pb(r), shards)


async def _read_combined(call: Any, on_release: ShardsHook | None = None, *,
                         round_id: bytes, dimension: int | None) -> CombinedResult | None:
    """One GetResult stream of a sharded round (``read_result_stream``): ``on_release`` gets
    every shard once all evidence is in, before any of the total is read."""

    async def released(header: pb.ResultHeader, evidence: list[ReleaseEvidence | None]
                       ) -> None:
        if on_release is not None:
            await on_release(_shard_releases(header, evidence))

    read = await read_result_stream(checked_stream(call, round_id, dimension), sharded=True,
                                    on_evidence=released)
    if read is None:
        return None
    header, evidence, total = read
    return CombinedResult(bytes(header.round_id), total, int(header.num_contributors),
                          tuple(_shard_releases(header, evidence)))


def _shard_releases(header: pb.ResultHeader, evidence: list[ReleaseEvidence | None]
                    ) -> list[ShardRelease]:
    return [ShardRelease(bytes(s.round_id), s.state == pb.AGGREGATION_STATE_RELEASED,
                         s.reached_unmask, part, s.abort_reason)
            for s, part in zip(header.shards, evidence, strict=True)]
