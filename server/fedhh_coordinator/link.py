"""The coordinator's link to the aggregator: ``fedhh.rpc.aggregator_client.AggregatorControl``
with its outcomes mapped onto what the runner distinguishes.

``fetch`` passes the runner's release hook through: the aggregator's result stream announces
the number of contributors (with the evidence of who they are) before the sum, and the hook
records the privacy spend then.
"""

from __future__ import annotations

import contextlib

import grpc

from fedhh.errors import FedhhError, StateError
from fedhh.rpc.aggregator_client import AggregatorControl, RoundAborted, open_channel
from fedhh.rpc.tls import TlsFiles
from fedhh.secagg import AggregateResult, ReleaseEvidence
from fedhh.secagg.config import SignedConfig
from fedhh_coordinator.runner import ReleaseHook, RoundAbortedError


class GrpcAggregatorLink:
    def __init__(self, address: str, tls: TlsFiles | None, control_token: bytes) -> None:
        self.channel = open_channel(address, tls.channel_credentials() if tls else None)
        self.control = AggregatorControl(self.channel, control_token)

    async def close(self) -> None:
        await self.channel.close()

    async def open_round(self, signed: SignedConfig) -> None:
        try:
            await self.control.open_round(signed)
        except grpc.aio.AioRpcError as error:
            raise StateError(f"aggregator unreachable ({error.code().name})") from None

    async def cancel(self, round_id: bytes) -> None:
        # Nothing to drop, or nobody to drop it: the round is gone either way.
        with contextlib.suppress(FedhhError, grpc.aio.AioRpcError):
            await self.control.cancel(round_id)

    async def fetch(self, round_id: bytes, timeout_s: float, on_release: ReleaseHook
                    ) -> AggregateResult:
        hook_failed: list[BaseException] = []

        async def guarded(evidence: ReleaseEvidence) -> None:
            try:
                # (The runner still takes the aggregator's count; its replacement charges
                # fedhh.secagg.verify_release(config, identity keys, evidence) instead.)
                await on_release(evidence.num_contributors)
            except BaseException as error:
                hook_failed.append(error)
                raise

        try:
            return await self.control.result(round_id, timeout_s, guarded)
        except RoundAborted as aborted:
            raise RoundAbortedError(f"the aggregator aborted the round: {aborted.reason}") from None
        except TimeoutError:
            await self.cancel(round_id)
            raise RoundAbortedError("the round did not finish before its deadline") from None
        except (FedhhError, grpc.aio.AioRpcError) as error:
            if hook_failed:
                raise hook_failed[0] from None  # the runner's own refusal or failure
            if isinstance(error, grpc.aio.AioRpcError):
                reason = f"lost the aggregator ({error.code().name})"
            else:
                reason = f"the aggregator refused the result call ({error})"
            raise RoundAbortedError(f"{reason}: nothing was released") from None
