"""The aggregation service's control API over gRPC, with its outcomes mapped onto what
``NetworkLink`` distinguishes: a single aggregator (``fedhh.rpc.aggregator_client.
AggregatorControl``) or, for sharded rounds, the combiner in front of several workers
(``fedhh.rpc.combiner_client.CombinerControl``); one address serves either, and
:meth:`GrpcAggregator.workers` tells which it is."""

from __future__ import annotations

import grpc
import numpy as np

from fedhh.errors import FedhhError
from fedhh.rounds import RoundAborted
from fedhh.rpc.aggregator_client import (
    AggregatorControl,
    AggregatorError,
    RoundOutcome,
    open_channel,
)
from fedhh.rpc.combiner_client import CombinerControl
from fedhh.rpc.tls import TlsFiles
from fedhh.secagg import ReleaseEvidence
from fedhh.secagg.config import SignedConfig
from fedhh.secagg.shards import ShardRelease
from fedhh_coordinator.link import (
    AggregatorOutcome,
    AggregatorUnavailable,
    EvidenceHook,
    ShardsHook,
)


class GrpcAggregator:
    def __init__(self, address: str, tls: TlsFiles | None, control_token: bytes) -> None:
        self.channel = open_channel(address, tls.channel_credentials() if tls else None)
        self.control = AggregatorControl(self.channel, control_token)
        self.combiner = CombinerControl(self.channel, control_token)

    async def workers(self) -> list[tuple[int, str]] | None:
        """The combiner's serving workers as (index, public address); None if the address is a
        single aggregator (it does not serve CombinerControl)."""
        try:
            workers = await self.combiner.workers()
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise AggregatorUnavailable(f"aggregation service unreachable "
                                        f"({error.code().name})") from None
        return [(w.index, w.public_address) for w in workers if w.serving]

    async def open_sharded(self, round_id: bytes, shards: list[tuple[SignedConfig, int]]
                           ) -> None:
        try:
            await self.combiner.open_round(round_id, shards)
        except grpc.aio.AioRpcError as error:
            raise AggregatorUnavailable(f"combiner unreachable ({error.code().name})") from None

    async def sharded_result(self, round_id: bytes, timeout_s: float, on_release: ShardsHook
                             ) -> tuple[np.ndarray, int]:
        hook_failed: list[BaseException] = []

        async def guarded(shards: list[ShardRelease]) -> None:
            try:
                await on_release(shards)
            except BaseException as error:
                hook_failed.append(error)
                raise

        try:
            result = await self.combiner.result(round_id, timeout_s, guarded)
        except RoundAborted as aborted:
            if hook_failed:
                raise hook_failed[0] from None  # the driver's own refusal
            raise RoundAborted(f"the combiner aborted the round: {aborted.reason}",
                               reached_unmask=aborted.reached_unmask) from None
        except (FedhhError, grpc.aio.AioRpcError) as error:
            if hook_failed:
                raise hook_failed[0] from None
            if isinstance(error, grpc.aio.AioRpcError):
                raise AggregatorUnavailable(error.code().name) from None
            raise AggregatorUnavailable(str(error)) from None
        return result.total, result.num_contributors

    async def close(self) -> None:
        await self.channel.close()

    async def open_round(self, signed: SignedConfig) -> None:
        try:
            await self.control.open_round(signed)
        except grpc.aio.AioRpcError as error:
            raise AggregatorUnavailable(f"aggregator unreachable ({error.code().name})") from None

    async def result(self, round_id: bytes, timeout_s: float, on_release: EvidenceHook
                     ) -> tuple[np.ndarray, int]:
        hook_failed: list[BaseException] = []

        async def guarded(evidence: ReleaseEvidence) -> None:
            try:
                await on_release(evidence)
            except BaseException as error:
                hook_failed.append(error)
                raise

        try:
            result = await self.control.result(round_id, timeout_s, guarded)
        except RoundAborted as aborted:
            if hook_failed:
                raise hook_failed[0] from None  # the driver's own refusal
            raise RoundAborted(f"the aggregator aborted the round: {aborted.reason}",
                               reached_unmask=aborted.reached_unmask) from None
        except (FedhhError, grpc.aio.AioRpcError) as error:
            if hook_failed:
                raise hook_failed[0] from None  # the driver's own refusal or failure
            if isinstance(error, grpc.aio.AioRpcError):
                raise AggregatorUnavailable(error.code().name) from None
            raise AggregatorUnavailable(str(error)) from None
        return result.total, result.num_contributors

    async def outcome(self, round_id: bytes, sharded: bool = False) -> AggregatorOutcome:
        answer: RoundOutcome
        try:
            if sharded:
                answer = (await self.combiner.outcome(round_id)).outcome
            else:
                answer = await self.control.outcome(round_id)
        except (grpc.aio.AioRpcError, AggregatorError) as error:
            name = error.code().name if isinstance(error, grpc.aio.AioRpcError) else str(error)
            raise AggregatorUnavailable(name) from None
        if answer.state == "unknown":
            reason = ("the aggregator journals its rounds and has no record of it"
                      if answer.durable else "the aggregator keeps no journal and does not "
                      "know the round")
            # A journaling aggregator knows every round it ever opened: unknown means never
            # opened (the coordinator stopped before the aggregator heard of it).
            return AggregatorOutcome("never" if answer.durable else "unknown", reason=reason)
        return AggregatorOutcome(answer.state, answer.reached_unmask, answer.sum_available,
                                 answer.num_contributors or None, answer.abort_reason,
                                 answer.stage.name if answer.stage is not None else "",
                                 {stage.name: n for stage, n in answer.stage_devices})

    async def cancel(self, round_id: bytes, sharded: bool = False) -> None:
        try:
            await (self.combiner if sharded else self.control).cancel(round_id)
        except grpc.aio.AioRpcError as error:
            raise AggregatorUnavailable(error.code().name) from None
