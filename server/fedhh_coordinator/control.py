"""The aggregation service's control API over gRPC (``fedhh_coordinator.aggregation``), its
answers mapped onto what ``NetworkLink`` distinguishes: a single aggregator
(``fedhh.rpc.aggregator_client.AggregatorControl``) or, for sharded rounds, the combiner in front
of several workers (``fedhh.rpc.combiner_client.CombinerControl``); one address serves either,
and :meth:`GrpcAggregator.workers` tells which it is."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import numpy as np

from fedhh.backoff import Backoff
from fedhh.errors import FedhhError, RoundAborted
from fedhh.rpc.aggregator_client import AggregatorControl, ReleaseMismatch, open_channel
from fedhh.rpc.combiner_client import CombinerControl
from fedhh.rpc.control_client import (
    AggregatorBusy,
    OutcomeView,
    RoundOutcome,
    passing,
    patiently,
    status_code,
)
from fedhh.rpc.tls import TlsFiles
from fedhh.secagg import Stage
from fedhh.secagg.config import RoundConfig, SignedConfig
from fedhh_coordinator.aggregation import (
    AggregatorOutcome,
    AggregatorRefused,
    AggregatorUnavailable,
    ControlTokenRefused,
    DeviceAddresses,
)

log = logging.getLogger(__name__)

# How long a stored sum's ``delivered`` is tried: the services' default --result-ttl, after
# which they have dropped the sum themselves; the pauses between tries.
DELIVERY_PATIENCE_S = 600.0
DELIVERY_RETRY_S = 0.5
DELIVERY_RETRY_MAX_S = 15.0


class _ServiceControl(ABC):
    """What settling a round takes at either service (``RoundService``): a result read behind
    the coordinator's release hook, the service's outcome, a cancel.

    A read that fails is the service away (``AggregatorUnavailable``) only where a later
    read may not meet the failure (``passing``); any other answer (a refusal, a call the
    service does not serve, a stream that breaks the wire contract) is ``AggregatorRefused``
    (``_failed``), which the link settles at once. Before, every failure was the service
    away, and a read refused while GetOutcome said the round ran was tried again till the
    round's deadline.

    The result is checked against the round asked for before the hook sees it: another
    round's answer is refused (the attempt aborted, charged as one that reached unmasking, the
    round cancelled at the service), as is a sum whose dimension is not the round's (its
    config's, also for a round resumed after a restart). Before, either was read as this
    round's release.

    The service holds a released sum until the coordinator has stored its release (GetResult's
    ``hold``, then CancelRound's ``delivered``, sent by ``delivered`` once the round driver
    committed it): a hook that did not let the sum be read (its charge waiting for a store
    that stayed away past the call's deadline), or a store that failed to commit the release
    of the sum read, leaves it there for the attempt's resume. Before, a sum sent whole was
    dropped by the service, read or not, and later said delivered as soon as it was read,
    before its release was stored: a store failing in between lost the round's sum.
    ``delivered``, and ``drop`` of a sum not to be read, are retried while the service is away
    (:meth:`_tell`)."""

    def __init__(self, client: AggregatorControl | CombinerControl, kind: str) -> None:
        self.client = client
        self.kind = kind
        self._deliveries: set[asyncio.Task[None]] = set()

    async def result(self, round_id: bytes, dimension: int, timeout_s: float,
                     on_release: Callable[[Any], Awaitable[None]]) -> tuple[np.ndarray, int]:
        hook_failed: list[BaseException] = []

        async def guarded(release: Any) -> None:
            try:
                await on_release(release)
            except BaseException as error:
                hook_failed.append(error)
                raise

        try:
            result = await self.client.result(round_id, timeout_s, guarded,
                                              dimension=dimension, hold=True)
        except ReleaseMismatch as mismatch:
            self._in_background(round_id, delivered=False)  # whatever it holds of it
            raise RoundAborted(f"the {self.kind}'s answer was refused: {mismatch}",
                               reached_unmask=True) from None
        except RoundAborted as aborted:
            if hook_failed:
                raise hook_failed[0] from None  # the driver's own refusal
            raise RoundAborted(f"the {self.kind} aborted the round: {aborted.reason}",
                               reached_unmask=aborted.reached_unmask) from None
        except (FedhhError, grpc.aio.AioRpcError) as error:
            if hook_failed:
                raise hook_failed[0] from None  # the driver's own refusal or failure
            raise self._failed(error, "GetResult") from None
        return result.total, result.num_contributors

    async def delivered(self, round_id: bytes) -> None:
        """Tell the service, in a task of its own (:meth:`_tell`): the round driver goes on
        at once. Before, one call was made and any failure ignored: a combiner killed as it
        came (every combiner-kill run) took the total over at its restart, re-collected it
        from its workers and held it, with their shard sums, to its --result-ttl (600 s by
        default), again at each restart meanwhile."""
        self._in_background(round_id, delivered=True)

    async def drop(self, round_id: bytes) -> None:
        """Have the service drop the round's sum unread (a refused release, a charge that
        failed), told as patiently as :meth:`delivered`. Before, one call was made and its
        failure ignored: a service away for it held the sum until its --result-ttl."""
        self._in_background(round_id, delivered=False)

    def _in_background(self, round_id: bytes, *, delivered: bool) -> None:
        task = asyncio.create_task(
            self._tell(round_id, delivered=delivered),
            name=f"{'delivered' if delivered else 'drop'} {round_id.decode(errors='replace')}")
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _tell(self, round_id: bytes, *, delivered: bool) -> None:
        """CancelRound, as ``delivered`` or not, tried again with backoff while the service
        cannot be reached (restarting, busy), until it answers, says it no longer knows the
        round, or ``DELIVERY_PATIENCE_S`` passed (the service has dropped the sum by then)."""
        extra = {"round_id": round_id.decode(errors="replace")}
        what = "that a sum was stored" if delivered else "to drop a sum not read"
        try:
            error = await patiently(
                lambda: self.client.cancel(round_id, delivered=delivered), DELIVERY_PATIENCE_S,
                Backoff(DELIVERY_RETRY_S, DELIVERY_RETRY_MAX_S))
        except Exception:  # (a bug: said here, not as a task's unretrieved error)
            log.exception(f"telling the {self.kind} {what} failed", extra=extra)
            return
        if isinstance(error, (grpc.aio.AioRpcError, AggregatorBusy)):
            log.warning(f"the {self.kind} was not told {what}; it holds the sum until its "
                        "--result-ttl", extra={**extra, "error": error.code().name if isinstance(
                            error, grpc.aio.AioRpcError) else str(error)})
        elif error is not None:  # (an answer no retry changes)
            log.warning(f"the {self.kind} refused to be told {what}",
                        extra={**extra, "error": str(error)})

    async def close(self) -> None:
        """Stop telling the service of stored or refused sums (it drops them at its
        --result-ttl)."""
        pending = list(self._deliveries)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    @abstractmethod
    async def _round_outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                             wait_s: float = 0.0) -> RoundOutcome: ...

    async def watch(self, round_id: bytes, seen: AggregatorOutcome | None, wait_s: float
                    ) -> AggregatorOutcome:
        """The service's word once the running round no longer shows ``seen``'s stage and
        counts, or after ``wait_s`` (a long-poll: GetOutcomeRequest's ``seen``); ``seen``
        None, or not running: at once. ``watched`` unset in the answer: the service answered
        at once (a version before the long-poll), and the caller paces its asks. Raises as
        :meth:`outcome`."""
        view = None
        if seen is not None and seen.state == "running":
            view = OutcomeView("running", Stage[seen.stage] if seen.stage else None,
                               tuple(sorted((Stage[name], n)
                                            for name, n in seen.stage_devices.items())))
        return await self.outcome(round_id, view, wait_s)

    async def outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                      wait_s: float = 0.0) -> AggregatorOutcome:
        """The service's word on the round. AggregatorUnavailable for a failure a later try
        may not meet (``passing``: the link asks again after it alone); AggregatorRefused,
        worded for the operator, for any other (a refusal, a call the service does not serve,
        an answer that breaks the wire contract). Before, every failure was the service away:
        a service refusing GetOutcome (its control token changed, another program at the
        address) was asked again for the link's recovery patience, 600 s, before the attempt
        was settled unknown, and a refusal the client maps to its own error (UNAUTHENTICATED,
        FAILED_PRECONDITION, INVALID_ARGUMENT, NOT_FOUND) failed the run with the attempt
        left open, uncharged."""
        try:
            answer = await self._round_outcome(round_id, seen, wait_s)
        except (grpc.aio.AioRpcError, FedhhError) as error:
            raise self._failed(error, "GetOutcome") from None
        if answer.state == "unknown":
            reason = (f"the {self.kind} journals its rounds and has no record of it"
                      if answer.durable else f"the {self.kind} keeps no journal and does not "
                      "know the round")
            # A journaling service knows every round it ever opened: unknown means never
            # opened (the coordinator stopped before the service heard of it).
            return AggregatorOutcome("never" if answer.durable else "unknown", reason=reason)
        return AggregatorOutcome(answer.state, answer.reached_unmask, answer.sum_available,
                                 answer.num_contributors or None, answer.abort_reason,
                                 answer.stage.name if answer.stage is not None else "",
                                 {stage.name: n for stage, n in answer.stage_devices},
                                 answer.declined, answer.watched)

    async def cancel(self, round_id: bytes) -> None:
        """Cancel a round (past its deadline). AggregatorUnavailable only for a failure a
        later try may not meet (``passing``: the link tries again after it alone); any other
        answer is AggregatorRefused (``_failed``). Before, every failure was the service away, and a
        service that refused the cancel was asked again for the link's recovery patience.
        RESOURCE_EXHAUSTED (the client's ``AggregatorBusy``) is passing too: no cancel is
        refused for the rounds a service holds, only for its load at that moment (its calls
        or a rate limit). Before, it ended the tries at once, and the round, left running,
        was settled by its outcome, "running": charged at n_min as one that may unmask."""
        try:
            await self.client.cancel(round_id)
        except (grpc.aio.AioRpcError, FedhhError) as error:
            raise self._failed(error, "CancelRound") from None

    async def _opened(self, call: Awaitable[Any], name_of_call: str,
                      round_id: Callable[[], bytes]) -> None:
        """A round's opening: a refused control token is ``ControlTokenRefused``, as at every
        other call; any other failed call the service away (``AggregatorUnavailable``); the
        service's refusal of the round (a ``FedhhError``) as the client raised it. Before,
        UNAUTHENTICATED was the client's AuthenticationError, a refusal of the round that
        aborted the attempt free, and PERMISSION_DENIED the service unreachable: the wrong
        --control-token-file spent every attempt of the run instead of stopping the
        coordinator. An opening refused so is the token's only where the service refuses
        it at the round's GetOutcome too (``_refuses_token``): UNAUTHENTICATED also answers a
        config not signed by the key the service holds, a refusal of the round, as before."""
        try:
            await call
        except (grpc.aio.AioRpcError, FedhhError) as error:
            if status_code(error) in _TOKEN_REFUSALS and await self._refuses_token(round_id):
                raise self._failed(error, name_of_call) from None
            if isinstance(error, grpc.aio.AioRpcError):
                raise AggregatorUnavailable(f"{self.kind} unreachable ({error.code().name})"
                                            ) from None
            raise

    async def _refuses_token(self, round_id: Callable[[], bytes]) -> bool:
        """Whether the service refuses the coordinator's control token: a GetOutcome of the
        round, which the service answers once the token passes (its check comes before the
        request is read). A round id that cannot be read, or a call that fails otherwise,
        tells nothing: no."""
        try:
            await self._round_outcome(round_id())
        except (grpc.aio.AioRpcError, FedhhError) as error:
            return status_code(error) in _TOKEN_REFUSALS
        return False

    def _failed(self, error: grpc.aio.AioRpcError | FedhhError, name_of_call: str
                ) -> AggregatorUnavailable | AggregatorRefused:
        """What a failed control call tells the link: the service away (``passing``), or
        refused, in words that name the service, the call, the status and what the operator
        does about it."""
        return refusal(error, f"the {self.kind}", name_of_call)


def refusal(error: grpc.aio.AioRpcError | FedhhError, who: str, name_of_call: str
            ) -> AggregatorUnavailable | AggregatorRefused:
    """What a failed control call says: the service away (``passing``, the one split of
    transient from permanent failures), or refused, in words that name ``who``, the call, the
    status and what the operator does about it; a refusal of the control token is
    ``ControlTokenRefused``."""
    code = status_code(error)
    if code is not None and passing(error):
        return AggregatorUnavailable(code.name)
    call = error if isinstance(error, grpc.aio.AioRpcError) else error.__cause__
    details = call.details() if isinstance(call, grpc.aio.AioRpcError) else str(error)
    what = (f"refused {name_of_call} ({code.name}: {details})" if code is not None else
            f"answered {name_of_call} against the wire contract ({details})")
    kind = ControlTokenRefused if code in _TOKEN_REFUSALS else AggregatorRefused
    return kind(f"{who} {what}; {_REMEDIES.get(code, _SEE_ITS_LOG)}")


# What the operator does about a service's refusal, by its status.
_TOKEN = ("the coordinator's --control-token-file must hold the token the service was "
          "started with")
_REMEDIES = {
    grpc.StatusCode.UNAUTHENTICATED: _TOKEN,
    grpc.StatusCode.PERMISSION_DENIED: _TOKEN,
    grpc.StatusCode.UNIMPLEMENTED: ("--aggregator must name a fedhh aggregator or combiner of "
                                    "this version"),
    None: "the service's fedhh version must be the coordinator's",
}
_SEE_ITS_LOG = "the service's log says why"
_TOKEN_REFUSALS = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


class _SingleControl(_ServiceControl):
    """``SingleAggregator`` over gRPC."""

    client: AggregatorControl

    async def open_round(self, signed: SignedConfig) -> None:
        await self._opened(self.client.open_round(signed), "OpenRound",
                           lambda: RoundConfig.from_bytes(signed.payload).round_id)

    async def _round_outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                             wait_s: float = 0.0) -> RoundOutcome:
        return await self.client.outcome(round_id, seen, wait_s)


class _CombinerControl(_ServiceControl):
    """``ShardCombiner`` over gRPC."""

    client: CombinerControl

    async def open_round(self, round_id: bytes, shards: list[tuple[SignedConfig, int]]
                         ) -> None:
        await self._opened(self.client.open_round(round_id, shards), "OpenShardedRound",
                           lambda: round_id)

    async def _round_outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                             wait_s: float = 0.0) -> RoundOutcome:
        return (await self.client.outcome(round_id, seen, wait_s)).outcome


class GrpcAggregator:
    """``AggregatorApi`` at one address over one channel."""

    def __init__(self, address: str, tls: TlsFiles | None, control_token: bytes) -> None:
        self.address = address  # named by the runs that wait for it
        self.channel = open_channel(address, tls.channel_credentials() if tls else None)
        self.single = _SingleControl(AggregatorControl(self.channel, control_token),
                                     "aggregator")
        self.combiner = _CombinerControl(CombinerControl(self.channel, control_token),
                                         "combiner")

    async def workers(self) -> list[tuple[int, DeviceAddresses]] | None:
        """The combiner's serving workers as (index, where devices reach it); None if the
        address is a single aggregator (it does not serve CombinerControl). A failure is the
        service away (``AggregatorUnavailable``) or refused (``AggregatorRefused``) as
        ``passing`` splits them, the split every other control call makes. Before, this call
        kept its own list of refusals, the two token codes: any other answer no later try
        changes (INTERNAL, INVALID_ARGUMENT) read as the service away, and the attempt waited
        for it for --aggregator-patience-seconds."""
        try:
            workers = await self.combiner.client.workers()
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise refusal(error, "the aggregation service", "DescribeWorkers") from None
        return [(w.index, DeviceAddresses(w.public_address, w.web_url, w.session_address))
                for w in workers if w.serving]

    async def close(self) -> None:
        await self.single.close()
        await self.combiner.close()
        await self.channel.close()
