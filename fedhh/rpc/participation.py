"""How a device's participation in a round ends, how its calls are retried, when its stages
close, and how the devices of one process take turns to compute: shared by the unary calls
(``fedhh.rpc.device_client``) and the session stream (``fedhh.rpc.device_stream``)."""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import grpc

from fedhh.backoff import full_jitter
from fedhh.secagg import Stage
from fedhh.v1 import aggregator_pb2 as pb

__all__ = ["CODE_OUTCOMES", "RETRIED_CODES", "ComputeTurns", "ParticipationEnd", "RetryPolicy",
           "RoundOver", "SessionResult", "Transport", "computed_in_turn", "given_up",
           "not_ready"]

_T = TypeVar("_T")
# The aborted rounds a ComputeTurns remembers (a device process takes part in a few at once).
ROUNDS_OVER = 64


class RoundOver(Exception):
    """A device's queued answer was not computed: another device of its process was told that
    the round aborted (``ComputeTurns.round_aborted``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of UNAVAILABLE and CANCELLED: ``attempts`` tries in all, with full-jitter
    exponential backoff (uniform in [0, min(cap, initial * 2^attempt)]: of the usual schemes,
    the one that spreads a crowd's retries the most; Brooker, "Exponential Backoff and Jitter",
    AWS Architecture Blog, 2015). The cap is ``max_backoff_s`` for those tries and
    ``patient_max_backoff_s`` for a patient call's further ones (its stage is still open): with
    2 s for all, a crowd of devices retried the calls an overloaded service shed as fast as it
    shed them."""

    attempts: int = 5
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    patient_max_backoff_s: float = 30.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        cap = self.max_backoff_s if attempt < self.attempts else max(self.max_backoff_s,
                                                                     self.patient_max_backoff_s)
        return full_jitter(self.initial_backoff_s, cap, attempt, rng)


class Transport(StrEnum):
    """How a device talks to its aggregator: one session stream, or the unary calls."""

    STREAM = "stream"
    UNARY = "unary"


class ParticipationEnd(StrEnum):
    """How a device's participation ended."""

    COMPLETED = "completed"  # its unmask shares were accepted
    DROPPED = "dropped"  # drop_at stopped it
    NOT_SELECTED = "not_selected"  # the round went on without it (it counts as dropped)
    LATE = "late"  # the stage closed before its request or message
    ROUND_ABORTED = "round_aborted"  # the aggregator aborted the round
    DEVICE_ABORTED = "device_aborted"  # the device refused a server request (SecAggAbort)
    REJECTED = "rejected"  # the aggregator refused a message (INVALID_ARGUMENT, ...)
    NOT_FOUND = "not_found"  # the aggregator does not know the round (or forgot it)
    UNAVAILABLE = "unavailable"  # unreachable, or shedding its calls, through the retries
    TIMED_OUT = "timed_out"  # no request arrived in time


@dataclass(frozen=True)
class SessionResult:
    """Where a device stopped: ``reached`` is the stage it was in (``Stage.DONE`` after its
    unmask shares were accepted); ``contributed`` says its masked input was accepted, so its
    report is in the sum if the round is released."""

    reached: Stage
    outcome: ParticipationEnd
    contributed: bool = False
    detail: str = ""


# Transient codes. Retrying them is safe because every device call is idempotent: the server
# takes the first copy of a message and answers an identical one accepted=False. CANCELLED
# reaches the caller as an AioRpcError only when the other side ended the call (gRPC core sheds
# calls beyond the server's backlog this way, before any handler runs); a local cancellation
# raises asyncio.CancelledError and is never retried. RESOURCE_EXHAUSTED is not retried: the
# aggregator answers it only where asking again cannot pass (a message over the receive cap;
# an answer over the device's); its device's earlier call still open there (an upload being
# read, long-polls held) is UNAVAILABLE, which passes once that call ends. The web device's
# round.ts RETRIED is the same set (tests/unit/rpc/test_device_retried_codes.py).
RETRIED_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED})

CODE_OUTCOMES = {
    grpc.StatusCode.ABORTED: ParticipationEnd.ROUND_ABORTED,
    grpc.StatusCode.NOT_FOUND: ParticipationEnd.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION: ParticipationEnd.LATE,
    grpc.StatusCode.UNAVAILABLE: ParticipationEnd.UNAVAILABLE,
    grpc.StatusCode.CANCELLED: ParticipationEnd.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ParticipationEnd.TIMED_OUT,
}


# An answer to a device's wait for its next request that holds no request (an AwaitStatus
# other than READY and PENDING): how its participation ends, and the detail it reports.
NOT_READY: dict[int, tuple[ParticipationEnd, str]] = {
    pb.AWAIT_STATUS_NOT_SELECTED: (ParticipationEnd.NOT_SELECTED, ""),
    pb.AWAIT_STATUS_CLOSED: (ParticipationEnd.LATE, "the stage closed"),
    pb.AWAIT_STATUS_ABORTED: (ParticipationEnd.ROUND_ABORTED, ""),  # (the detail: its reason)
}


def not_ready(stage: Stage, status: int, abort_reason: str = "",
              contributed: bool = False) -> SessionResult:
    """Where a device stops at ``stage`` when its wait for the stage's request is answered
    ``status`` (``NOT_READY``; any other is REJECTED, "unexpected answer N"), with the round's
    ``abort_reason`` as the detail of an abort: the unary calls' reading and the session
    stream's. (Before, each had its own table: the stream's gave a device that was not
    selected, or a round aborted without a reason, the detail "unexpected answer 3" or "... 5",
    which the device process's failure summary then listed.)"""
    outcome, detail = NOT_READY.get(status, (ParticipationEnd.REJECTED,
                                             f"unexpected answer {status}"))
    if outcome is ParticipationEnd.ROUND_ABORTED:
        detail = abort_reason
    return SessionResult(stage, outcome, contributed, detail)


class ComputeTurns:
    """The devices of one process compute in turns of the event loop, at most ``slice_s`` of
    CPU each, the loop looking at its sockets between two turns.

    A fleet's devices get a stage's requests together: thousands of answers (milliseconds of
    cryptography each) became ready in one turn of the event loop, and the loop ran them all
    before it looked at its sockets again. At 50,000 devices (25,000 in a process) such turns
    lasted up to a minute, and the tasks' arrival several seconds: TLS handshakes to the
    aggregators' framed ports ran past the 20 s connect timeout, and each channel that timed
    out took its 1,024 devices to the gRPC port for a minute (1,000-2,000 sessions per
    worker). Here a device queues its computation (first come, first served); one callback
    runs the queue until ``slice_s`` has passed (one computation at least) and, if any is
    left, again in a later turn, after its sockets. The devices whose answers a turn computed
    go on together in the next, so their messages still leave in one write per connection,
    as before.

    An answer queued for a round that another device of the process was told has aborted
    (``round_aborted``) is not computed: its device meets ``RoundOver`` and leaves the round.
    Only a device that has sent its stage's message is told of an abort (the aggregator
    answers its wait for the next request); one still queued to compute its answer learned it
    only once it had computed and sent it. On a loaded host (docker compose at a load of 23)
    an abort at share keys left each device process hundreds of share computations behind,
    done for a round that was over while the next attempt's check-in waited for its devices."""

    def __init__(self, slice_s: float = 0.02) -> None:
        self.slice_s = slice_s
        self._queue: collections.deque[
            tuple[Callable[[], Any], asyncio.Future[Any], bytes | None]] = collections.deque()
        self._scheduled = False
        # The aborted rounds (secure-aggregation session ids, the latest ROUNDS_OVER) and why.
        self._over: collections.OrderedDict[bytes, str] = collections.OrderedDict()

    def round_aborted(self, session_id: bytes, reason: str) -> None:
        """A device of this process was told that round ``session_id`` aborted."""
        self._over[session_id] = reason
        self._over.move_to_end(session_id)
        while len(self._over) > ROUNDS_OVER:
            self._over.popitem(last=False)

    def abort_reason(self, session_id: bytes) -> str | None:
        """Why round ``session_id`` aborted, if a device of this process was told it did."""
        return self._over.get(session_id)

    async def run(self, compute: Callable[[], _T], session_id: bytes | None = None) -> _T:
        """``compute()``, in this process's turn for it; ``session_id``: the round it answers
        for, if any (raises RoundOver, uncomputed, once that round is known aborted)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._queue.append((compute, future, session_id))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._turn)
        return await future

    def _turn(self) -> None:
        ends = time.perf_counter() + self.slice_s
        queue = self._queue
        while queue:
            compute, future, session_id = queue.popleft()
            if future.cancelled():
                continue  # (its device left while it waited)
            reason = None if session_id is None else self._over.get(session_id)
            if reason is not None:
                future.set_exception(RoundOver(reason))
                continue
            try:
                future.set_result(compute())
            except Exception as error:  # (the device's to raise, as if computed in place)
                future.set_exception(error)
            if time.perf_counter() >= ends:
                break
        if queue:
            asyncio.get_running_loop().call_soon(self._turn)
        else:
            self._scheduled = False


def given_up(result: SessionResult, computing: ComputeTurns | None,
             session_id: bytes) -> SessionResult:
    """``result``, unless the device gave up waiting (``TIMED_OUT``: past its give-up time, or
    its call's deadline) on a round that another device of its process was told aborted
    (``ComputeTurns.round_aborted``): then it ends ``ROUND_ABORTED`` with that reason, which
    is what happened to the round. (Before, such a device logged timed_out although the abort
    was known in its process, waiting for it; only the label was wrong.)"""
    if result.outcome is not ParticipationEnd.TIMED_OUT or computing is None:
        return result
    reason = computing.abort_reason(session_id)
    if reason is None:
        return result
    return SessionResult(result.reached, ParticipationEnd.ROUND_ABORTED, result.contributed,
                         f"{reason} (told to another device of this process)")


def ended_by_status(stage: Stage, code: grpc.StatusCode, details: str | None,
                    contributed: bool, computing: ComputeTurns | None,
                    session_id: bytes) -> SessionResult:
    """Where a device stops at ``stage`` when its aggregator ends a call (unary) or its
    session stream with a final status ``code`` (``CODE_OUTCOMES``; any other is REJECTED):
    an abort is told to the other devices of its process (``ComputeTurns.round_aborted``), and
    a timeout read as the abort they were told of (``given_up``). The unary calls' reading and
    the session stream's (before, each had its own copy)."""
    outcome = CODE_OUTCOMES.get(code, ParticipationEnd.REJECTED)
    if outcome is ParticipationEnd.ROUND_ABORTED and computing is not None:
        computing.round_aborted(session_id, details or "aborted")
    return given_up(SessionResult(stage, outcome, contributed, f"{code.name}: {details}"),
                    computing, session_id)


async def computed_in_turn(turns: ComputeTurns | None, compute: Callable[[], _T],
                           session_id: bytes | None = None) -> _T:
    """``compute()`` (a stage's answer: the device's cryptography), in the turns of the devices
    of its process (``turns``: shared by them; None for a device alone in its process);
    ``session_id``: the round it answers for (``ComputeTurns.run``)."""
    return compute() if turns is None else await turns.run(compute, session_id)
