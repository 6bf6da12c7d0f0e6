"""A synchronous client of the coordinator's admin API, for operators' commands and tests."""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path
from typing import Any

import grpc

from fedhh.backoff import Backoff
from fedhh.errors import ConfigError, StateError
from fedhh.rpc import serving
from fedhh.rpc.credentials import bearer_metadata
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc

FINAL = ("done", "failed", "cancelled")
# The most tokens one MintEnrollmentTokens call may ask for (the coordinator's MAX_MINT).
MINT_PER_CALL = 50_000
# How long ``start_run`` waits for its answer unless told: StartRun plans the run's privacy
# accounting in the call, 9 s for a 1,024-round run on a quiet 2-core machine and 28 s at
# load 10 (before, 60 s, which a busier coordinator passed).
START_TIMEOUT_S = 300.0
# How long one of ``wait``'s GetRun calls asks to be held while the run does not change (the
# coordinator answers at the change; it holds a call 60 s at most): a follower's cost is a
# call per change, and one per WAIT_CALL_S while nothing changes.
WAIT_CALL_S = 30.0
# ``wait``'s pause between calls where a call cannot be held (the coordinator unreachable, or
# one that answers at once, without a version)
POLL_S = 0.5
# The tries of one MintEnrollmentTokens call that was not answered (UNAVAILABLE, its
# deadline), each the same request: its request id makes the coordinator take out what an
# unanswered try stored, so tries mint once (``fedhh_coordinator.enrollment.mint``).
MINT_TRIES = 3
_MINT_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class PartlyMinted(StateError):
    """A mint of several calls that failed after some: ``tokens``, the first of the ``count``
    asked for, are stored at the coordinator and valid, and must reach whoever asked (before,
    the failure's RpcError dropped them); ``why``: how the call failed."""

    def __init__(self, tokens: list[str], count: int, why: str) -> None:
        super().__init__(f"{len(tokens):,} of {count:,} tokens were minted before a call failed "
                         f"({why})")
        self.tokens, self.count = tokens, count


# A mint's id as the caller gives it (``mint_tokens``): each of its calls is ``ID-N``, within
# the coordinator's 64 characters of the same alphabet for a request id.
MINT_ID = re.compile(r"[A-Za-z0-9_-]{1,48}")
MINT_ID_RULE = "1 to 48 characters of A-Z, a-z, 0-9, _ and -"


def new_mint_id() -> str:
    """A mint's id drawn by the caller, as ``new_run_id`` draws a run's: known before the
    calls, so that a mint whose answer never came can be made again under it."""
    return secrets.token_hex(12)


def new_run_id() -> str:
    """A run id drawn by the caller, as the coordinator draws one for a StartRun without:
    known before the call, so that a caller who never got the answer can find the run and
    repeat the call without starting a second one."""
    return secrets.token_hex(8)


class AdminClient:
    def __init__(self, address: str, token: bytes, ca: str | Path | None = None) -> None:
        self.channel = serving.command_channel(address, ca, serving.OPTIONS)
        self.stub = pb_grpc.AdminServiceStub(self.channel)
        self.metadata = bearer_metadata(token)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_run(self, config: pb.RunConfig, run_id: str = "",
                  timeout_s: float = START_TIMEOUT_S) -> pb.Run:
        """Start the run ``run_id`` (``new_run_id()`` when ""): the coordinator answers a
        repeat of the same id and config with that run, so a call whose answer never came
        (its deadline, the connection lost) may be made again as it was."""
        return self.stub.StartRun(pb.StartRunRequest(config=config,
                                                     run_id=run_id or new_run_id()),
                                  metadata=self.metadata, timeout=timeout_s)

    def run(self, run_id: str, seen: str = "", wait_s: float = 0.0) -> pb.Run:
        """The run; with ``seen`` (a ``Run.version``), once it changed from that version, or
        after ``wait_s``."""
        return self.stub.GetRun(pb.GetRunRequest(run_id=run_id, seen=seen,
                                                 wait_ms=int(wait_s * 1000)),
                                metadata=self.metadata, timeout=30 + wait_s)

    def runs(self) -> list[pb.Run]:
        return list(self.stub.ListRuns(pb.ListRunsRequest(), metadata=self.metadata,
                                       timeout=30).runs)

    def results(self, run_id: str) -> pb.Results:
        return self.stub.GetResults(pb.GetResultsRequest(run_id=run_id),
                                    metadata=self.metadata, timeout=30)

    def cancel(self, run_id: str) -> pb.Run:
        return self.stub.CancelRun(pb.CancelRunRequest(run_id=run_id), metadata=self.metadata,
                                   timeout=30)

    def enrollment(self) -> pb.Enrollment:
        """How many devices are enrolled, and the enrollment tokens by fate."""
        return self.stub.GetEnrollment(pb.GetEnrollmentRequest(), metadata=self.metadata,
                                       timeout=30)

    def mint_tokens(self, count: int, ttl_s: float = 0.0, label: str = "",
                    mint_id: str = "") -> list[str]:
        """``count`` one-time enrollment tokens (valid ``ttl_s`` seconds; 0: until used), in
        calls of at most ``MINT_PER_CALL``, each made again up to ``MINT_TRIES`` times while
        unanswered; PartlyMinted, holding those minted, when a call after the first fails.
        ``mint_id`` (``new_mint_id()`` when ""): each call's request id is ``MINT_ID-N``, N its
        first token's index, so the same mint made again with it (the same count, ttl_s and
        label) takes out the unused tokens its unanswered calls stored."""
        if mint_id and not MINT_ID.fullmatch(mint_id):
            raise ConfigError(f"a mint's id is {MINT_ID_RULE}, got {mint_id!r:.60}")
        mint_id = mint_id or new_mint_id()
        tokens: list[str] = []
        while len(tokens) < count:
            asked = min(count - len(tokens), MINT_PER_CALL)
            request = pb.MintEnrollmentTokensRequest(count=asked, ttl_s=ttl_s, label=label,
                                                     request_id=f"{mint_id}-{len(tokens)}")
            try:
                got = self._mint_call(request)
            except grpc.RpcError as error:
                if not tokens:
                    raise  # (nothing minted)
                raise PartlyMinted(tokens, count, f"{error.code().name}: {error.details()}"
                                   ) from error
            tokens += got[:asked]
            if len(got) != asked:
                # (before, an answer short of the count was asked for again, for ever if the
                # coordinator answered none)
                why = f"the coordinator answered {len(got):,} tokens to a call for {asked:,}"
                if not tokens:
                    raise StateError(f"no tokens were minted: {why}")
                raise PartlyMinted(tokens, count, why)
        return tokens

    def _mint_call(self, request: pb.MintEnrollmentTokensRequest) -> list[str]:
        """One call of a mint, made again while unanswered. Its tries failing, the error
        raised is the last of a try that may have reached the coordinator, if one may have
        (not ``serving.never_sent``): the caller is told that tokens may be stored under the
        request's id. Before, a try cut off past its deadline and then a coordinator no
        longer listening raised the last, never sent, and the mint was said to store none."""
        backoff, tries = Backoff(0.5, 4.0), 1
        reached: grpc.RpcError | None = None
        while True:
            try:
                return list(self.stub.MintEnrollmentTokens(request, metadata=self.metadata,
                                                           timeout=60).tokens)
            except grpc.RpcError as error:
                if not serving.never_sent(error):
                    reached = error
                if error.code() not in _MINT_RETRIED or tries == MINT_TRIES:
                    raise (reached or error) from None
            tries += 1
            time.sleep(backoff.pause())

    def wait(self, run_id: str, timeout_s: float, on_change: Any = None,
             idle: bool = False) -> pb.Run:
        """Follow the run until it is done, failed or cancelled; ``on_change(run)`` is called
        whenever a round attempt ends or the attempt in progress changes phase or stage.
        ``idle``: ``timeout_s`` counts from the last such change (a long run that goes on is
        waited for), else from the start.

        Each call after the first is held at the coordinator until the run changes
        (``WAIT_CALL_S`` at most); before, the run was asked for twice a second. A call that
        finds the coordinator unreachable or too slow to answer within its own deadline is
        made again (reading a run changes nothing): a busy coordinator is not a lost run; only
        ``timeout_s`` ends the wait."""
        deadline = time.monotonic() + timeout_s
        seen: tuple[object, ...] = ()
        version = ""
        while True:
            try:
                run = self.run(run_id, version,
                               min(WAIT_CALL_S, max(deadline - time.monotonic(), 0.0)))
            except grpc.RpcError as error:
                if error.code() not in serving.COMMAND_RETRIED:
                    raise
                run = None
            if run is not None:
                p = run.progress
                now = (len(run.rounds), run.state, p.round, p.attempt, p.phase, p.stage)
                if now != seen:
                    seen = now
                    if idle:
                        deadline = time.monotonic() + timeout_s
                    if on_change is not None:
                        on_change(run)
                if run.state in FINAL:
                    return run
            if time.monotonic() > deadline:
                raise StateError(f"run {run_id}: no progress in {timeout_s:.0f} s" if idle
                                 else f"run {run_id} not finished after {timeout_s:.0f} s")
            version = run.version if run is not None else version
            if not version or run is None:
                time.sleep(POLL_S)
