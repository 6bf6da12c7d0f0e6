"""The coordinator's client of the secure-aggregation service (grpc.aio); a device's client is
``fedhh.rpc.device_client``, the calls it shares with the combiner's ``fedhh.rpc.control_client``.

Coordinator (one :class:`AggregatorControl` per aggregator; every call sends the control token)::

    channel = open_channel("aggregator:7100", credentials)    # or any grpc.aio.Channel
    control = AggregatorControl(channel, token)
    signed = sign_config(config, coordinator_key)             # config.device_auth must be True
    session_id = await control.open_round(signed)             # 1. before devices get the task
    try:                                                      # 2. wait for the outcome
        result = await control.result(config.round_id, timeout=seconds, on_release=hook)
        # AggregateResult(session_id, round_id, total, num_contributors, survivors,
        # signatures); the aggregator has now dropped the sum
    except RoundAborted as aborted:                           # nothing was released
        ...aborted.reason, aborted.reached_unmask...          # reason: an AbortReason value
    except TimeoutError:                                      # still running after `timeout`
        await control.cancel(config.round_id)                 # 3. (optional) abort / drop it
    outcome = await control.outcome(config.round_id)          # any time, also after a restart

``on_release(evidence)`` runs after the aggregator said "released" and sent the evidence of the
contributors (:class:`~fedhh.secagg.ReleaseEvidence`: U3, the survivors' consistency signatures
over it, the claimed count), before a byte of the sum is read: check it with
:func:`fedhh.secagg.verify_release`, record the spend, or raise to refuse the sum (then cancel
the round to drop it). ``RoundAborted.reached_unmask`` says the round aborted after unmask
requests went out (devices may have revealed shares: charge the attempt). Rejections raise the
``fedhh.errors`` class of their status code (AuthenticationError, NotFoundError, ConflictError,
StateError, ConfigError, AggregatorBusy); transport failures raise ``grpc.aio.AioRpcError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import grpc

from fedhh.errors import RoundAborted, shown
from fedhh.rpc.control_client import (
    CALL_TIMEOUT_S,
    AggregatorBusy,
    AggregatorError,
    ControlClient,
    OutcomeView,
    RoundOutcome,
    domain_error,
    open_channel,
    outcome_from_pb,
    read_result_stream,
)
from fedhh.secagg import AggregateResult, ReleaseEvidence, SignedConfig
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

__all__ = [
    "AggregatorBusy",
    "AggregatorControl",
    "AggregatorError",
    "ReleaseHook",
    "ReleaseMismatch",
    "RoundAborted",
    "RoundOutcome",
    "domain_error",
    "open_channel",
]

ReleaseHook = Callable[[ReleaseEvidence], Awaitable[None]]


class ReleaseMismatch(AggregatorError):
    """The service's answer to GetResult is another round's, or its sum has another dimension
    than the round's: refused before its evidence reaches the release hook, so it is never
    counted into the round asked for."""


async def checked_stream(call: Any, round_id: bytes, dimension: int | None
                         ) -> AsyncIterator[pb.ResultChunk]:
    """``call``'s ResultChunks, its header checked first against the round asked for: its
    round id (whatever its state) and, once released, ``dimension`` (None: not known here).
    Before, a header naming another round, or another dimension, was read as this round's."""
    first = True
    async for chunk in call:
        if first and chunk.WhichOneof("part") == "header":
            header = chunk.header
            if bytes(header.round_id) != round_id:
                raise ReleaseMismatch(
                    f"the answer for round {shown(round_id)} is round "
                    f"{shown(bytes(header.round_id))}'s: refused, not counted into the round")
            if (dimension is not None and header.state == pb.AGGREGATION_STATE_RELEASED
                    and header.dimension != dimension):
                raise ReleaseMismatch(
                    f"the sum released for round {shown(round_id)} has dimension "
                    f"{header.dimension}, the round's is {dimension}: refused")
        first = False
        yield chunk


class AggregatorControl(ControlClient):
    """The coordinator's calls: open a round, wait for its outcome, cancel it."""

    def __init__(self, channel: grpc.aio.Channel, token: str | bytes, *,
                 call_timeout: float = CALL_TIMEOUT_S) -> None:
        super().__init__(pb_grpc.AggregatorControlStub(channel), token, call_timeout)

    async def open_round(self, signed: SignedConfig) -> bytes:
        """Open the round; returns its session id. Opening the same signed config again is a
        no-op (safe to retry)."""
        request = pb.OpenRoundRequest(config=signed.payload, signature=signed.signature)
        response = await self._unary(self._stub.OpenRound, request)
        return bytes(response.session_id)

    async def result(self, round_id: bytes, timeout: float,
                     on_release: ReleaseHook | None = None, *,
                     dimension: int | None = None, hold: bool = False) -> AggregateResult:
        """Wait up to ``timeout`` seconds for the round's sum.

        ``on_release(evidence)`` runs before the sum is read (module docstring). Raises
        :class:`RoundAborted` if the round released nothing, ``TimeoutError`` if it is still
        running after ``timeout``, :class:`ReleaseMismatch` for an answer of another round or
        a sum of another ``dimension`` than the round's (when given). The aggregator drops the
        sum once it has been sent; with ``hold``, once ``cancel(round_id, delivered=True)``
        says it was read (a hook that fails leaves it for another call).
        """
        return await self._result(round_id, timeout, partial(
            _read_result, on_release=on_release, round_id=round_id, dimension=dimension),
            hold)

    async def outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                      wait_s: float = 0.0) -> RoundOutcome:
        """What became of the round (GetOutcome): also after its outcome was delivered and,
        with a journaling aggregator, after the aggregator restarted. With ``seen``: once the
        running round's view differs from it, or after ``wait_s`` (a watch's long-poll)."""
        return outcome_from_pb(await self._outcome(round_id, seen, wait_s))


async def _read_result(call: Any, on_release: ReleaseHook | None = None, *,
                       round_id: bytes, dimension: int | None) -> AggregateResult | None:
    """The stream of one GetResult (``read_result_stream``): ``on_release`` gets the evidence
    once it is complete, before any of the sum is read."""

    async def released(header: pb.ResultHeader, evidence: list[ReleaseEvidence | None]
                       ) -> None:
        if on_release is not None:
            await on_release(_only(evidence))

    read = await read_result_stream(checked_stream(call, round_id, dimension), sharded=False,
                                    on_evidence=released)
    if read is None:
        return None
    header, evidence, total = read
    only = _only(evidence)
    return AggregateResult(bytes(header.session_id), bytes(header.round_id), total,
                           int(header.num_contributors), only.survivors, only.signatures)


def _only(evidence: list[ReleaseEvidence | None]) -> ReleaseEvidence:
    (only,) = evidence
    assert only is not None  # an unsharded round's single part is its released sum's
    return only
