"""What the coordinator's two control clients share: the aggregator's (``AggregatorControl``,
``fedhh.rpc.aggregator_client``) and the combiner's (``CombinerControl``,
``fedhh.rpc.combiner_client``) speak the same calls (GetResult, GetOutcome, CancelRound) with the
same bearer token, error map, result polling and result-stream checks; they differ in how a
round is opened and in what a released result carries (one sum with its evidence, or a total
with each shard's evidence).

Rejections raise the ``fedhh.errors`` class of their status code (``domain_error``);
an aborted round raises :class:`~fedhh.errors.RoundAborted`; a result still running after the
caller's timeout raises ``TimeoutError``; transport failures raise ``grpc.aio.AioRpcError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import numpy as np

from fedhh.backoff import Backoff
from fedhh.errors import (
    AuthenticationError,
    ConfigError,
    ConflictError,
    FedhhError,
    NotFoundError,
    RoundAborted,
    StateError,
)
from fedhh.rpc.aggregator_wire import stage_from_pb, stage_to_pb
from fedhh.rpc.credentials import bearer_metadata
from fedhh.rpc.serving import open_channel
from fedhh.secagg import ReleaseEvidence, Stage
from fedhh.secagg.config import MAX_COHORT
from fedhh.secagg.prg import mask_dtype
from fedhh.secagg.shards import MAX_SHARDS
from fedhh.v1 import aggregator_pb2 as pb

__all__ = [
    "CALL_TIMEOUT_S",
    "PASSING",
    "AggregatorBusy",
    "AggregatorError",
    "ControlClient",
    "OutcomeView",
    "ReportedAbort",
    "ResultBuffer",
    "RoundOutcome",
    "check_header",
    "domain_error",
    "open_channel",
    "outcome_from_pb",
    "outcome_state",
    "outcome_view_from_pb",
    "passing",
    "patiently",
    "persevere",
    "read_result_stream",
    "stage_counts",
    "status_code",
]

R = TypeVar("R")
_SERVER_WAIT_CAP_S = 30.0  # ask for at most this long per GetResult (the server caps it too)
# A control call's deadline, by default: a unary call's whole time, and a GetResult's past the
# wait it asks for (``ControlClient._result``). A released sum's header thus reaches its caller
# with about this long left to read the sum, and what its ``on_release`` does first (the
# coordinator's charge, ``Runner.write_charge``) spends it.
CALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RoundOutcome:
    """What the aggregator (or the combiner) says became of a round (GetOutcome).

    ``state``: "unknown", "running", "aborted" or "released". ``reached_unmask``: unmask
    requests were (or may have been) sent. ``durable``: the aggregator journals outcomes, so
    they survive its restarts (without it, "unknown" after a restart says nothing).
    """

    state: str
    session_id: bytes = b""
    stage: Stage | None = None
    reached_unmask: bool = False
    abort_reason: str = ""
    delivered: bool = False
    sum_available: bool = False
    num_contributors: int = 0
    durable: bool = False
    stage_devices: tuple[tuple[Stage, int], ...] = ()  # accepted per closed stage
    declined: int | None = None  # members that gave up their seats; None: not said
    watched: bool = False  # the service honoured the ask's ``seen`` (``OutcomeView``)


@dataclass(frozen=True)
class OutcomeView:
    """What a stage watch follows of a round (GetOutcomeRequest's ``seen``): its state, open
    stage and per-stage counts. A watch asks the service to answer once the round's view is
    no longer the one it last saw, instead of asking every second: each ask was a TLS call
    of about 1 ms of CPU a side, at the coordinator, the combiner and every worker, for every
    second of every round."""

    state: str
    stage: Stage | None = None
    stage_devices: tuple[tuple[Stage, int], ...] = ()

    @classmethod
    def of(cls, outcome: RoundOutcome | Any) -> OutcomeView:
        """The view of an outcome (a client's ``RoundOutcome``, a service's record)."""
        return cls(str(outcome.state), outcome.stage, tuple(outcome.stage_devices))

    def moved(self, outcome: RoundOutcome | Any) -> bool:
        """Whether ``outcome``'s state or stage is not this view's (its counts aside)."""
        return str(outcome.state) != self.state or outcome.stage != self.stage

    def to_pb(self) -> pb.OutcomeSeen:
        seen = pb.OutcomeSeen(state=pb.OutcomeState.Value(f"OUTCOME_STATE_{self.state.upper()}"),
                              stage_devices=[pb.StageCount(stage=stage_to_pb(stage), devices=n)
                                             for stage, n in self.stage_devices])
        if self.stage is not None:
            seen.stage = stage_to_pb(self.stage)
        return seen


def outcome_view_from_pb(seen: pb.OutcomeSeen) -> OutcomeView:
    """A request's ``seen``; a state this version does not know reads as no state at all,
    which no outcome has (the answer comes at once)."""
    state = pb.OutcomeState.Name(seen.state) if seen.state in pb.OutcomeState.values() else ""
    return OutcomeView(state.removeprefix("OUTCOME_STATE_").lower(), stage_from_pb(seen.stage),
                       tuple(sorted(stage_counts(seen.stage_devices))))


class AggregatorError(FedhhError):
    """The aggregator's answer does not follow the wire contract."""


class AggregatorBusy(FedhhError):
    """The aggregator holds too many rounds (RESOURCE_EXHAUSTED)."""


_DOMAIN_ERRORS: dict[grpc.StatusCode, type[FedhhError]] = {
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: ConflictError,
    grpc.StatusCode.FAILED_PRECONDITION: StateError,
    grpc.StatusCode.INVALID_ARGUMENT: ConfigError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: AggregatorBusy,
}


def domain_error(error: grpc.aio.AioRpcError) -> Exception:
    kind = _DOMAIN_ERRORS.get(error.code())
    return kind(f"aggregator: {error.details()}") if kind is not None else error


# Failures that a later try may not meet (the service restarting, busy, slow): a word to a
# service that holds a sum (delivered, drop), a cancel, a round's outcome, are tried again after
# these alone (``passing``). Any other answer (UNIMPLEMENTED, INTERNAL, a refusal) is the same
# at every try.
PASSING = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                     grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.CANCELLED,
                     grpc.StatusCode.ABORTED})


def status_code(error: BaseException) -> grpc.StatusCode | None:
    """The gRPC status a control call failed with: its own, or that of the call a
    ``domain_error`` was made of (None: not a call's failure)."""
    for cause in (error, error.__cause__):
        if isinstance(cause, grpc.aio.AioRpcError):
            return cause.code()
    return grpc.StatusCode.RESOURCE_EXHAUSTED if isinstance(error, AggregatorBusy) else None


def passing(error: BaseException) -> bool:
    """Whether a later try of the control call that failed with ``error`` may not meet it
    (``PASSING``): the one split of transient from permanent failures, the coordinator's and
    the combiner's. A malformed answer (``AggregatorError``) and every refusal are permanent."""
    return (isinstance(error, (grpc.aio.AioRpcError, AggregatorBusy))
            and status_code(error) in PASSING)


async def persevere(call: Callable[[], Awaitable[R]], give_up: float, backoff: Backoff) -> R:
    """``call()``'s answer, tried again after ``backoff``'s pause while it fails as
    ``passing`` says, until the loop's clock reaches ``give_up``: no try starts at or past it
    but the first, and no pause runs past it. Any other failure, or the last passing one,
    is raised."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return await call()
        except Exception as error:
            left = give_up - loop.time()
            if not passing(error) or left <= 0:
                raise
            await asyncio.sleep(min(backoff.pause(), left))
            if loop.time() >= give_up:
                raise


async def patiently(call: Callable[[], Awaitable[Any]], patience_s: float,
                    backoff: Backoff) -> Exception | None:
    """``call()`` (a CancelRound: a held sum said delivered, or dropped), tried again while
    it fails as ``passing`` says, for up to ``patience_s`` (``persevere``). None once the
    service has it (NOT_FOUND too: it holds nothing of the round any more), else the error
    that ended the tries: one no try changes, or the last passing one. The coordinator's word
    to its aggregation service and a combiner's to its workers, both of which hold a sum
    until told or until their --result-ttl."""
    try:
        await persevere(call, asyncio.get_running_loop().time() + patience_s, backoff)
    except NotFoundError:
        return None
    except (grpc.aio.AioRpcError, FedhhError) as error:
        return error
    return None


def stage_counts(counts: Any) -> tuple[tuple[Stage, int], ...]:
    """(stage, devices) pairs of a GetOutcome answer, unknown stages left out."""
    pairs = ((stage_from_pb(c.stage), int(c.devices)) for c in counts)
    return tuple((stage, n) for stage, n in pairs if stage is not None)


def outcome_state(value: int) -> str:
    """An ``OutcomeState`` as "unknown", "running", "aborted" or "released"."""
    state = pb.OutcomeState.Name(value).removeprefix("OUTCOME_STATE_").lower()
    if state == "unspecified":
        raise AggregatorError("GetOutcome answered without a state")
    return state


def outcome_from_pb(response: pb.GetOutcomeResponse) -> RoundOutcome:
    return RoundOutcome(outcome_state(response.state), bytes(response.session_id),
                        stage_from_pb(response.stage), response.reached_unmask,
                        response.abort_reason, response.delivered, response.sum_available,
                        int(response.num_contributors), response.durable,
                        stage_counts(response.stage_devices),
                        # (an aggregator before the field leaves it unset: not "none declined")
                        int(response.declined) if response.HasField("declined") else None,
                        response.watched)


class ReportedAbort(RoundAborted):
    """The service's own report that the round aborted (not a release this client refused)."""


def check_header(header: pb.ResultHeader, *, sharded: bool) -> int | None:
    """The checks of a result stream's header, in order: the shard list (one to ``MAX_SHARDS``
    shards for a sharded round, none otherwise), then the state. Returns None while the round
    runs, else the byte length of the released sum; raises ``RoundAborted`` for an aborted
    round and ``AggregatorError`` for a header that breaks the wire contract."""
    if header.state == pb.AGGREGATION_STATE_RUNNING:
        return None
    if sharded and not 1 <= len(header.shards) <= MAX_SHARDS:
        raise AggregatorError("a sharded result must list its shards")
    if not sharded and len(header.shards):
        raise AggregatorError("an unsharded result lists no shards")
    if header.state == pb.AGGREGATION_STATE_ABORTED:
        raise ReportedAbort(header.abort_reason or "unknown reason",
                            reached_unmask=header.reached_unmask)
    if header.state != pb.AGGREGATION_STATE_RELEASED or header.modulus_bits not in (16, 32):
        raise AggregatorError(f"unexpected result header (state {header.state})")
    expected = int(header.dimension * header.modulus_bits // 8)
    if header.total_bytes != expected:
        raise AggregatorError("the result's length does not match its dimension")
    counts = ([(s.survivor_count, s.signature_count) for s in header.shards] if sharded
              else [(header.survivor_count, header.signature_count)])
    if any(survivors > MAX_COHORT or signatures > MAX_COHORT
           for survivors, signatures in counts):
        raise AggregatorError("the result announces more survivors than any cohort")
    if any(s.state != pb.AGGREGATION_STATE_RELEASED and (s.survivor_count or s.signature_count)
           for s in header.shards):
        raise AggregatorError("evidence announced for a shard that did not release")
    return expected


EvidenceHook = Callable[[pb.ResultHeader, list[ReleaseEvidence | None]], Awaitable[None]]


async def read_result_stream(call: Any, *, sharded: bool, on_evidence: EvidenceHook
                             ) -> tuple[pb.ResultHeader, list[ReleaseEvidence | None],
                                        np.ndarray] | None:
    """One GetResult stream: its header (``check_header``); if released, the evidence of each
    part (the round's, or each shard's: None for a shard that did not release), then the sum.
    ``on_evidence(header, evidence)`` runs once all announced evidence is in, before a byte
    of the sum is read. None while the round runs; ``AggregatorError`` for a stream that
    breaks the wire contract."""
    header: pb.ResultHeader | None = None
    announced: list[tuple[int, int, int | None]] = []  # survivors, signatures, contributors
    survivors: list[list[int]] = []
    signatures: list[list[tuple[int, bytes]]] = []
    evidence: list[ReleaseEvidence | None] | None = None
    data: ResultBuffer | None = None
    what = "total" if sharded else "sum"
    async for chunk in call:
        part = chunk.WhichOneof("part")
        if header is None:
            if part != "header":
                raise AggregatorError("the result stream must start with its header")
            header = chunk.header
            expected = check_header(header, sharded=sharded)
            if expected is None:
                return None
            data = ResultBuffer(header, expected)
            announced = ([(s.survivor_count, s.signature_count,
                           int(s.num_contributors) if s.state == pb.AGGREGATION_STATE_RELEASED
                           else None) for s in header.shards] if sharded else
                         [(header.survivor_count, header.signature_count,
                           int(header.num_contributors))])
            survivors = [[] for _ in announced]
            signatures = [[] for _ in announced]
        elif part == "evidence":
            j = chunk.evidence.shard
            if evidence is not None or j >= len(announced):
                raise AggregatorError("the result stream holds more evidence than announced")
            survivors[j].extend(chunk.evidence.survivors)
            signatures[j].extend((int(s.device_id), bytes(s.signature))
                                 for s in chunk.evidence.signatures)
            if len(survivors[j]) > announced[j][0] or len(signatures[j]) > announced[j][1]:
                raise AggregatorError("the result stream holds more evidence than announced")
        elif part == "data":
            if evidence is None or data is None:
                raise AggregatorError(f"the {what} came before the evidence of its contributors")
            data.add(chunk.data)
            continue
        else:
            raise AggregatorError(f"unexpected part {part!r} in the result stream")
        if evidence is None and all(
                (len(sv), len(sg)) == counts[:2]
                for sv, sg, counts in zip(survivors, signatures, announced, strict=True)):
            evidence = [None if contributors is None else
                        ReleaseEvidence(tuple(sv), tuple(sg), contributors)
                        for sv, sg, (_, _, contributors) in zip(survivors, signatures, announced,
                                                                strict=True)]
            await on_evidence(header, evidence)
    if header is None or data is None or evidence is None:
        raise AggregatorError("the result stream ended early")
    return header, evidence, data.total()


class ResultBuffer:
    """The released sum's bytes as the stream's data parts bring them (after the evidence).

    The buffer grows with the bytes received, up to the header's length: it was allocated
    (and zeroed) whole as the header arrived, so a header alone, declaring a dimension of
    2^32 - 1, made its reader (the coordinator, or a combiner reading a worker) take 16 GiB
    before a byte of the sum came (outside probe, thirty-sixth stop)."""

    def __init__(self, header: pb.ResultHeader, expected: int) -> None:
        self._bits = header.modulus_bits
        self._expected = expected
        self._buffer = bytearray()
        self._received = 0

    def add(self, data: bytes) -> None:
        if self._received + len(data) > self._expected:
            raise AggregatorError("the result stream holds more than the declared sum")
        self._buffer += data
        self._received += len(data)

    def total(self) -> np.ndarray:
        if self._received != self._expected:
            raise AggregatorError("the result stream ended early")
        dtype = mask_dtype(self._bits)
        return np.frombuffer(self._buffer, dtype=dtype).astype(dtype.newbyteorder("="),
                                                               copy=False)


class ControlClient:
    """The calls both control services answer alike; every call sends the control token."""

    def __init__(self, stub: Any, token: str | bytes, call_timeout: float) -> None:
        self._stub = stub
        self._metadata = bearer_metadata(token)
        self._call_timeout = call_timeout

    async def _unary(self, method: Any, request: Any, wait_s: float = 0.0) -> Any:
        """``method(request)``, given ``wait_s`` (a long-poll's wait) past the call's time."""
        try:
            return await method(request, metadata=self._metadata,
                                timeout=self._call_timeout + wait_s)
        except grpc.aio.AioRpcError as error:
            raise domain_error(error) from error

    async def _result(self, round_id: bytes, timeout: float,
                      read: Callable[[Any], Awaitable[R | None]], hold: bool = False) -> R:
        """Long-poll GetResult until the round's result, for up to ``timeout`` seconds;
        ``read`` reads one GetResult stream: the result, or None while the round runs."""
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while True:
            wait_ms = int(min(max(0.0, until - loop.time()), _SERVER_WAIT_CAP_S) * 1000)
            call = self._stub.GetResult(pb.GetResultRequest(round_id=round_id, wait_ms=wait_ms,
                                                            hold=hold),
                                        metadata=self._metadata,
                                        timeout=wait_ms / 1000 + self._call_timeout)
            try:
                result = await read(call)
            except grpc.aio.AioRpcError as error:
                raise domain_error(error) from error
            except ReportedAbort:
                # The service forgets an aborted round when its handler resumes after writing
                # the report; cancelling the call at once could cancel the handler first (it
                # did on a loaded machine), leaving the round held until its outcome expired.
                # The report is its stream's one message: the call ends right after it. A
                # service that hung after the report, or trailers lost in a partition, cost the
                # call's whole deadline (up to _SERVER_WAIT_CAP_S + call_timeout) before the
                # abort was told; the wait for the end is one call's time, and a wait cut short
                # (this bound, or this task cancelled) cancels the call.
                try:
                    await asyncio.wait_for(call.code(), self._call_timeout)
                except TimeoutError:
                    pass
                finally:
                    call.cancel()  # nothing to do once the service ended it
                raise
            except BaseException:
                call.cancel()
                raise
            if result is not None:
                return result
            if loop.time() >= until:
                raise TimeoutError(f"round {round_id!r} still running after {timeout} s")

    async def _outcome(self, round_id: bytes, seen: OutcomeView | None = None,
                       wait_s: float = 0.0) -> pb.GetOutcomeResponse:
        """GetOutcome; with ``seen``, a long-poll of up to ``wait_s`` for a change of it
        (GetOutcomeRequest's ``seen``)."""
        request = pb.GetOutcomeRequest(round_id=round_id)
        if seen is None:
            return await self._unary(self._stub.GetOutcome, request)
        request.seen.CopyFrom(seen.to_pb())
        request.wait_ms = max(0, int(wait_s * 1000))
        return await self._unary(self._stub.GetOutcome, request, wait_s)

    async def cancel(self, round_id: bytes, *, delivered: bool = False) -> str:
        """Abort the round if it is running, or drop its unfetched sum; returns the round's
        state afterwards ("running", "released" or "aborted"). Idempotent. ``delivered``: the
        sum (held: ``result``'s ``hold``) was read, and is dropped as delivered."""
        response = await self._unary(self._stub.CancelRound,
                                     pb.CancelRoundRequest(round_id=round_id,
                                                           delivered=delivered))
        return pb.AggregationState.Name(response.state).removeprefix("AGGREGATION_STATE_").lower()
