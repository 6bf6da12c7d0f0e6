"""Thin gRPC servicers of the coordinator: validation and translation only; the work is in
``Runner``, ``Lobby`` and ``Store``. Errors become status codes in ``fedhh.rpc.errors``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.codec.codebook import BUILTIN_NAMES
from fedhh.config import RunConfig
from fedhh.errors import (
    AuthenticationError,
    ConfigError,
    ConflictError,
    NotFoundError,
    RateLimited,
    StoreDamaged,
    shown,
)
from fedhh.rpc.credentials import raw_public
from fedhh.rpc.errors import status_errors
from fedhh.rpc.run_config import from_proto, to_proto
from fedhh.secagg.primitives import is_valid_ed25519_public
from fedhh.server import HeavyHitter
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator import auth, metrics
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.enrollment import (
    AttestationVerifier,
    RateLimiter,
    check_enrollment_signature,
    mint,
)
from fedhh_coordinator.keys import KeyOwners, check_round_keys
from fedhh_coordinator.progress import RunChanges
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import (
    FixedRuns,
    RunFixed,
    ShownDenyLists,
    check_run_id,
    config_alone,
    create_run,
    stored_ledger,
)
from fedhh_coordinator.slow_reads import off_loop, shared, shared_after
from fedhh_coordinator.store import (
    RUN_ID,
    RUN_ID_RULE,
    EnrollmentCounts,
    RoundRow,
    RunHead,
    RunRow,
    Store,
    decoded,
)

log = logging.getLogger(__name__)

# A GetTask long-poll is held at most this long: it returns when the device's task changes
# (lobby.py), so the bound only ends a call that nothing answers, and it must outlast a round.
# At 60 s, devices waiting through a round of 50,000 devices (minutes) asked again every
# minute (that round: 37 GetTask calls per device, re-polls and retries of shed calls). A
# device behind a proxy with a shorter idle timeout asks for less (``wait_ms``).
# The runs whose configs as listed are kept (``AdminService._run``): a few hundred bytes each
# (no deny list, a codebook's name alone), so that a listing of this many runs reads none
# again.
LISTED_CONFIGS = 4096
MAX_WAIT_MS = 30 * 60_000
RETRY_AFTER_MS = 1_000
# A GetRun long-poll is held at most this long (``GetRunRequest.wait_ms``): it is answered at
# the run's next change (``RunChanges``), so the bound only answers a follower of a run that
# waits, which asks again.
MAX_RUN_WAIT_MS = 60_000
MAX_ATTESTATION_BYTES = 16 * 1024
# The enrollments that may wait for the store at once (each in ``_ENROLLING``'s threads): one
# more is refused RESOURCE_EXHAUSTED at once, and its device asks again later. The store wrote
# each enrollment on the event loop: while it was slow (a file locked by another process for
# its busy timeout, a PostgreSQL server failing over), each enrollment held every device's
# call, and the ones the rate limit let in queued behind it without bound.
ENROLLS_WAITING = 64
# (two threads: SQLite writes one transaction at a time, and the runner's default executor
# stays the runner's)
_ENROLLING = ThreadPoolExecutor(2, thread_name_prefix="fedhh-enroll")
# The most tokens one MintEnrollmentTokens call mints. Its answer (66 bytes a token on the wire)
# must fit the 4 MiB a gRPC client receives by default, 63,550 tokens: before, 100,000 made a
# 6.6 MB answer that such a client refused (RESOURCE_EXHAUSTED) after the tokens were stored.
# `fedhh admin mint-tokens` asks for more in several calls (fedhh.rpc.admin_client).
MAX_MINT = 50_000
# The longest lifetime a token is minted with, a year (ttl_s 0: valid until used). Before,
# ttl_s inf or 1e308 passed as a lifetime, stored as an expiry of inf: a token that never
# expired said to expire.
MAX_TOKEN_TTL_S = 365 * 86_400
# The shortest, a second: a token must outlive its way from the minting call to a device's
# Enroll. Before, ttl_s 1e-300 (or 1e-3) minted tokens expired as they were stored (their
# expiry, time.time() + 1e-300, is the minting instant), counted as minted and enrolling nobody.
MIN_TOKEN_TTL_S = 1


def check_label(label: str) -> None:
    """A label of a device or of enrollment tokens: kept for the operator's records, so at
    most 64 bytes of printable text. A NUL in it was an internal error on PostgreSQL (its text
    cannot hold one) and stored as given on SQLite; newlines and terminal escapes would reach
    whoever reads the records."""
    if len(label.encode()) > 64:
        raise ConfigError(f"label must be at most 64 bytes, got {len(label.encode())}")
    if not label.isprintable():
        raise ConfigError(f"label must be printable text (no control or format characters "
                          f"such as NUL, newlines or escapes), got {shown(label)}")


class TaskWaiter(Protocol):
    """Where a device's GetTask waits: the coordinator's ``Lobby``, or a selector's
    ``SelectorLobby`` (``fedhh_coordinator.selector``)."""

    async def wait_for_task(self, device_id: int, round_keys: tuple[bytes, bytes], wait_s: float,
                            known: bytes = b"") -> pb.SignedTask | None: ...


class DeviceService(pb_grpc.DeviceServiceServicer):
    """``key``: the coordinator's signing key, or (at a selector) its raw public key."""

    def __init__(self, store: Store, lobby: TaskWaiter, key: Ed25519PrivateKey | bytes,
                 verifier: AttestationVerifier, enroll_limit: RateLimiter,
                 owners: KeyOwners | None = None) -> None:
        self.store = store
        self.lobby = lobby
        self.public = key if isinstance(key, bytes) else raw_public(key)
        self.verifier = verifier
        self.enroll_limit = enroll_limit
        # Each device's last round keys that passed the checks, and who presented each key
        # first: its owner, who made it (issue 28; fedhh_coordinator.keys). A device presents
        # the same keys at every poll until a task uses them, so each pair costs its X25519
        # checks once.
        self.owners = owners if owners is not None else KeyOwners()  # (an empty one is falsy)
        # Each device's GetTask in flight: its connection (the peer) and its handler's task;
        # and the handlers a newer call of their device replaced (ended ALREADY_EXISTS).
        self._polling: dict[int, tuple[str, asyncio.Task[Any]]] = {}
        self._replaced: set[asyncio.Task[Any]] = set()
        self._enrolling = 0  # enrollments waiting for the store (``ENROLLS_WAITING``)
        # Each identity key's store write under way (``Enroll``): it goes on in its thread
        # after its call ended, and a retry of the key is written after it.
        self._writing: dict[bytes, Future[int]] = {}

    @status_errors
    async def Enroll(self, request: pb.EnrollRequest, context: grpc.aio.ServicerContext
                     ) -> pb.EnrollResponse:
        peer = context.peer() or ""
        self.enroll_limit.check(peer.rsplit(":", 1)[0])
        if len(request.attestation) > MAX_ATTESTATION_BYTES:
            raise ConfigError(f"attestation must be at most {MAX_ATTESTATION_BYTES} bytes")
        attested = self.verifier.verify(request, peer)
        if len(request.identity_public_key) != 32:
            raise ConfigError("identity_public_key must be a 32-byte Ed25519 public key")
        if not is_valid_ed25519_public(request.identity_public_key):
            raise ConfigError("identity_public_key is not a point of Ed25519's prime-order "
                              "subgroup (small order, off the curve, or with a torsion part)")
        check_label(request.label)
        check_enrollment_signature(request)
        if self._enrolling >= ENROLLS_WAITING:
            raise RateLimited(f"{self._enrolling} enrollments are waiting for the coordinator's "
                              "store, which is slow now; retry in a few seconds")
        key = bytes(request.identity_public_key)
        self._enrolling += 1
        try:
            # The write of an earlier call of this key (one that ended at its caller's
            # deadline, the device sending the same request again) goes on in its thread: this
            # one is written after it, so that the credential the store keeps is the one this
            # answer carries (``Store.add_device``'s reissue). Before, the two were written in
            # the two threads at once, and where the earlier was stored last, it replaced the
            # credential of the answer the device got with one nobody holds.
            while (earlier := self._writing.get(key)) is not None and not earlier.done():
                await asyncio.wait([asyncio.wrap_future(earlier)])
            credential = auth.new_credential()
            write = _ENROLLING.submit(self.store.add_device, auth.credential_hash(credential),
                                      key, request.label, attested.token_hash)
            self._writing[key] = write
            asyncio.wrap_future(write).add_done_callback(
                lambda _: self._writing.pop(key) if self._writing.get(key) is write else None)
            device_id = await asyncio.wrap_future(write)
        finally:
            self._enrolling -= 1
        metrics.ENROLLED.inc()
        return pb.EnrollResponse(device_id=device_id, credential=credential,
                                 coordinator_public_key=self.public)

    def authenticate(self, metadata: tuple[tuple[str, str | bytes], ...] | None) -> int:
        """The id of the enrolled device whose credential the call's bearer holds."""
        device_id, credential = auth.parse_device_bearer(metadata)
        record = self.store.device(device_id)
        auth.verify_device(record[0] if record else None, credential)
        return device_id

    @status_errors
    async def GetTask(self, request: pb.GetTaskRequest, context: grpc.aio.ServicerContext
                      ) -> pb.GetTaskResponse:
        device_id = self.authenticate(context.invocation_metadata())
        if request.device_id != device_id:
            raise AuthenticationError("device_id does not match the credential")
        round_keys = (bytes(request.c_pk), bytes(request.s_pk))
        new_keys = self.owners.current(device_id) != round_keys
        if new_keys:
            check_round_keys(*round_keys)
        if len(request.known_task) not in (0, 32):
            raise ConfigError("known_task is the 32-byte SHA-256 of a task, or empty")
        # One call of a device at a time: a second on the same connection is refused; one on
        # another connection replaces the waiting one, as a session stream replaces its
        # device's older stream. The device reconnected, and its old connection may have died
        # without a reset, which nothing here sees: refusing the new call locked the device
        # out for the old one's wait (30 minutes as devices ask) and every round meanwhile.
        peer = context.peer() or ""
        waiting = self._polling.get(device_id)
        if waiting is not None and waiting[0] == peer:
            raise RateLimited("this device already has a GetTask waiting on this connection; "
                              "one at a time")
        # (claimed last: a refused call changes nothing, so the keys of a call of the device
        # still waiting stay its own)
        if new_keys:
            self.owners.claim(device_id, round_keys)
        if waiting is not None:
            self._replaced.add(waiting[1])
            waiting[1].cancel()
        wait_s = min(request.wait_ms or MAX_WAIT_MS, MAX_WAIT_MS) / 1000
        handler = asyncio.current_task()
        assert handler is not None  # (a coroutine's call always runs in a task)
        self._polling[device_id] = (peer, handler)
        try:
            task = await self.lobby.wait_for_task(device_id, round_keys, wait_s,
                                                  bytes(request.known_task))
        except asyncio.CancelledError:
            if handler not in self._replaced:
                raise
            handler.uncancel()
            raise ConflictError("replaced by a newer GetTask of this device on another "
                                "connection") from None
        finally:
            self._replaced.discard(handler)
            if self._polling.get(device_id, (peer, None))[1] is handler:
                del self._polling[device_id]
        if task is None:
            metrics.TASKS_WAIT.inc()
            return pb.GetTaskResponse(retry_after_ms=RETRY_AFTER_MS)
        metrics.TASKS_GIVEN.inc()
        return pb.GetTaskResponse(task=task)


class AdminService(pb_grpc.AdminServiceServicer):
    def __init__(self, store: Store, runner: Runner, admin_token: bytes,
                 budget: LifetimeBudget, deny: ShownDenyLists | None = None,
                 fixed: FixedRuns | None = None, changes: RunChanges | None = None) -> None:
        """``deny``: the deny lists displayed and ``fixed``: the runs' fixed parts kept, shared
        with the dashboard's views; ``changes``: the runner's, which GetRun's long-poll waits
        on."""
        self.store = store
        self.runner = runner
        self.changes = RunChanges() if changes is None else changes
        self.admin_token = admin_token
        self.budget = budget
        self.deny = ShownDenyLists() if deny is None else deny
        self.fixed = FixedRuns() if fixed is None else fixed
        # (run id, created_at) -> its config as ListRuns lists it (``_run``), the latest listed
        self._listed_configs: OrderedDict[tuple[str, float], pb.RunConfig] = OrderedDict()
        self._listed_lock = threading.Lock()  # (ListRuns reads in slow reads' threads)
        # run id -> its fixed part's wire config being made (``_wire``)
        self._wiring: dict[str, asyncio.Future[pb.RunConfig]] = {}
        # The runs StartRun is storing now, by id: what a second StartRun of the id and a
        # CancelRun of it meet before the run is in the store (``_storing``).
        self._storing: dict[str, asyncio.Future[Any]] = {}
        self._asked: dict[str, RunConfig] = {}  # (the config each of those asked for)
        self._minting: dict[str, asyncio.Future[list[str]]] = {}  # (by request id)
        # (GetEnrollment's count under way, and the one its later callers wait for)
        self._counting: dict[None, asyncio.Future[EnrollmentCounts]] = {}
        self._count_next: dict[None, asyncio.Future[EnrollmentCounts]] = {}

    def authenticate(self, metadata: tuple[tuple[str, str | bytes], ...] | None) -> None:
        auth.check_admin(metadata, self.admin_token)

    def _check(self, context: grpc.aio.ServicerContext) -> None:
        self.authenticate(context.invocation_metadata())

    @status_errors
    async def StartRun(self, request: pb.StartRunRequest, context: grpc.aio.ServicerContext
                       ) -> pb.Run:
        self._check(context)
        # (its id drawn here when none is given, so that the run is known by it while stored)
        run_id = request.run_id or secrets.token_hex(8)
        check_run_id(run_id)  # (before the store is asked for a run of that id)
        config = await asyncio.to_thread(from_proto, request.config)
        repeated = await self._repeated(run_id, config)
        if repeated is not None:
            return repeated
        # The run is stored in a thread, which a call cancelled meanwhile (its deadline, the
        # caller's Ctrl-C) does not stop: the runner is woken once the thread ends, however
        # the call did. Before, such a run was stored but the runner, idle, never heard of
        # it: it stayed pending, and StartRun again with its id was ALREADY_EXISTS.
        stored = asyncio.ensure_future(create_run(self.store, config, run_id, self.budget))
        self._storing[run_id] = stored
        self._asked[run_id] = config
        stored.add_done_callback(lambda done: self._stored(run_id, done))
        row = await asyncio.shield(stored)
        return await self._answer(row.run_id)

    async def _repeated(self, run_id: str, config: RunConfig) -> pb.Run | None:
        """The run a StartRun of ``run_id`` asking for ``config`` repeats, once stored; None
        for a new run. A caller whose StartRun passed its deadline (planning a long run takes
        its seconds, more on a busy machine) cannot tell whether the run was stored, and asks
        again with the same id and config: that call is answered the run, waiting for the
        earlier call's storing if it goes on, which is done once. Before, it was refused
        ALREADY_EXISTS, the run stored or being stored, so a retry could not tell success
        from another's run. The same id with another config is refused, naming the fields
        that differ: it asks for another run."""
        while True:
            if run_id in self._storing:
                _same_run(run_id, self._asked[run_id], config, "being stored by an earlier "
                          "StartRun")
                await asyncio.shield(self._storing[run_id])  # (its failure is this call's)
                return await self._answer(run_id)
            try:
                kept = RunConfig.from_dict(await off_loop(self.store.run_config, run_id))
            except NotFoundError:
                if run_id not in self._storing:  # (else begun while the store was asked)
                    return None
                continue
            _same_run(run_id, kept, config, "stored", planned=True)
            return await self._answer(run_id)

    def _stored(self, run_id: str, stored: asyncio.Future[Any]) -> None:
        del self._storing[run_id], self._asked[run_id]
        if not stored.cancelled():
            stored.exception()  # (the call's to answer; retrieved here for a call gone)
        self.runner.wake()

    @status_errors
    async def MintEnrollmentTokens(self, request: pb.MintEnrollmentTokensRequest,
                                   context: grpc.aio.ServicerContext
                                   ) -> pb.MintEnrollmentTokensResponse:
        self._check(context)
        if not 1 <= request.count <= MAX_MINT:
            raise ConfigError(f"count must be in [1, {MAX_MINT}], got {request.count}")
        if not (request.ttl_s == 0 or MIN_TOKEN_TTL_S <= request.ttl_s <= MAX_TOKEN_TTL_S):
            raise ConfigError(f"ttl_s must be 0 (valid until used) or in [{MIN_TOKEN_TTL_S}, "
                              f"{MAX_TOKEN_TTL_S:,}] seconds (a second to a year), got "
                              f"{request.ttl_s}")
        check_label(request.label)
        if request.request_id and not RUN_ID.fullmatch(request.request_id):
            raise ConfigError(f"request_id must be {RUN_ID_RULE}, got "
                              f"{shown(request.request_id)}")
        key = request.request_id
        # A repeat waits for the mint of its id under way (its caller's deadline passed, and
        # the thread goes on): taking out that mint's tokens while it stored more left some.
        while key and (earlier := self._minting.get(key)) is not None and not earlier.done():
            await asyncio.wait([earlier])
        # (in a thread, as StartRun stores a run: 50,000 tokens drawn, hashed and stored took
        # 1 to 6 s, during which the loop answered no device and no caller)
        job = asyncio.ensure_future(asyncio.to_thread(
            mint, self.store, request.count, request.ttl_s or None, request.label,
            request_id=key))
        if key:
            self._minting[key] = job
        job.add_done_callback(lambda _: self._minted(key, job))
        return pb.MintEnrollmentTokensResponse(tokens=await asyncio.shield(job))

    def _minted(self, key: str, job: asyncio.Future[list[str]]) -> None:
        if self._minting.get(key) is job:
            del self._minting[key]
        if not job.cancelled():
            job.exception()  # (the call's to answer; retrieved here for a call gone)

    @status_errors
    async def GetEnrollment(self, request: pb.GetEnrollmentRequest,
                            context: grpc.aio.ServicerContext) -> pb.Enrollment:
        self._check(context)
        # (a count over every token ever minted, 0.15 s at 300,000: one in a slow reads'
        # thread for every caller that comes while one runs, begun as it ends; a burst of
        # calls queued one each)
        counts = await shared_after(self._counting, self._count_next, None,
                                    self.store.enrollment)
        return pb.Enrollment(devices_enrolled=counts.devices,
                             last_enrolled_at=counts.last_enrolled_at,
                             tokens_unused=counts.tokens_unused,
                             tokens_used=counts.tokens_used,
                             tokens_expired=counts.tokens_expired)

    @status_errors
    async def GetRun(self, request: pb.GetRunRequest, context: grpc.aio.ServicerContext
                     ) -> pb.Run:
        self._check(context)
        if request.seen and request.wait_ms:
            await self.changes.wait(request.run_id, request.seen,
                                    min(request.wait_ms, MAX_RUN_WAIT_MS) / 1000)
        with self._said_if_storing(request.run_id):
            return await self._answer(request.run_id)

    @contextlib.contextmanager
    def _said_if_storing(self, run_id: str) -> Iterator[None]:
        """A run the store does not know that a StartRun is storing is said to be so (GetRun,
        GetResults). Before: "unknown run", and a caller whose StartRun passed its deadline
        started it again. The store is asked first: a StartRun of a stored run's id, a retry
        of one that succeeded, is storing it until the store refuses it ALREADY_EXISTS."""
        try:
            yield
        except NotFoundError:
            if run_id not in self._storing:
                raise
            raise NotFoundError(f"run {shown(run_id)} is not stored yet: a StartRun of it is "
                                "storing it") from None

    @status_errors
    async def ListRuns(self, request: pb.ListRunsRequest, context: grpc.aio.ServicerContext
                       ) -> pb.ListRunsResponse:
        self._check(context)
        listed = [(run_id, state, self.runner.progress_of(run_id))
                  for run_id, state in self.store.run_states()]
        return pb.ListRunsResponse(runs=await off_loop(
            lambda: [self._listed(*run) for run in listed]))

    @status_errors
    async def GetResults(self, request: pb.GetResultsRequest,
                         context: grpc.aio.ServicerContext) -> pb.Results:
        self._check(context)
        with self._said_if_storing(request.run_id):
            # (the run's fixed part kept, GetRun's and the dashboard's: before, each call read
            # the row whole and rebuilt the tree, ~3 s with 1,000,000 deny items)
            fixed = await self.fixed.get(self.store, request.run_id)
        # (displayed once a run, the calls that come meanwhile waiting for it without a
        # thread: ``ShownDenyLists.show``)
        deny = await self.deny.show(request.run_id, fixed)
        return await off_loop(self._results, request.run_id, deny, fixed)

    def _results(self, run_id: str, deny: tuple[str, ...], kept: RunFixed) -> pb.Results:
        row, fixed = self.fixed.current(self.store, run_id, kept)
        if fixed is not kept:  # (another run of the id, stored since)
            deny = self.deny.shown(run_id, fixed)
        parts = fixed.parts(row)
        codec = parts.tree.codec

        def wire(h: HeavyHitter) -> pb.HeavyHitter:
            wired = pb.HeavyHitter(
                item=h.item, estimate=h.estimate, round=h.round, code_bytes=h.code_bytes,
                ended=h.ended, truncated=h.truncated, note=h.note,
                bits=h.bits if h.truncated else 0)
            if codec.max_bits <= 64:
                # (wider codes leave the fixed64 unset, and a client sees it absent: before,
                # it held 0, which no client could tell from a code of 0)
                wired.code = h.code
            return wired

        return pb.Results(
            run_id=row.run_id, state=row.state,
            heavy_hitters=[wire(h) for h in parts.tree.heavy_hitters(parts.state)],
            cut_prefixes=[wire(h) for h in parts.tree.cut_prefixes(parts.state)],
            deny_list=deny,
            ledger_json=json.dumps(row.ledger, sort_keys=True), rounds=self._rounds(row.run_id),
        )

    @status_errors
    async def CancelRun(self, request: pb.CancelRunRequest, context: grpc.aio.ServicerContext
                        ) -> pb.Run:
        self._check(context)
        run_id = request.run_id
        by = f"the admin API's caller at {context.peer()}"
        try:
            self._cancel(run_id, by)
        except NotFoundError:
            storing = self._storing.get(run_id)
            if storing is None:
                raise
            # A run StartRun is still storing (its caller's deadline passed, and the caller
            # cancels it) is cancelled once stored, even if this call is gone by then. Before,
            # the cancel was NOT_FOUND, and the run was stored after it and ran, charged. (A
            # stored run's id that a retried StartRun is storing is cancelled at once, above:
            # waiting for that StartRun's refusal took its solve's time.)
            cancelling = asyncio.ensure_future(self._cancel_stored(storing, run_id, by))
            # (a storing that failed leaves its NOT_FOUND to this call's caller; retrieved here
            # for a call gone by then, else logged as "exception was never retrieved")
            cancelling.add_done_callback(lambda done: done.cancelled() or done.exception())
            await asyncio.shield(cancelling)
        return await self._answer(run_id)

    async def _cancel_stored(self, storing: asyncio.Future[Any], run_id: str, by: str) -> None:
        with contextlib.suppress(Exception):  # (not stored: its StartRun's caller was told why)
            await storing
        self._cancel(run_id, by)

    def _cancel(self, run_id: str, by: str) -> None:
        # Its state alone, read on the loop, where the runner changes it, before any read of
        # the row whole: a row read in a thread may be stale by then (a pending run the runner
        # started meanwhile was marked cancelled while the runner drove it on, every round
        # charged, and it ended done), and such a read waits its turn behind the slow reads
        # (``off_loop``): four GetResults of a large deny list held the cancel past its
        # caller's deadline, never asked. The answer, read whole, may still wait for them.
        state = self.store.run_state(run_id)
        if state == "pending":
            self.store.set_run_state(run_id, "cancelled", "cancelled by the operator")
            self.changes.changed(run_id)
            log.info("run cancelled", extra={"run_id": run_id, "round": None, "by": by})
        elif state == "running":
            self.runner.cancel(run_id, by)
            # (a round in its check-in ends at once, nothing charged: Runner.cancel)
            log.info("run cancel asked: the run stops once its round under way ends, at once "
                     "if the round is still in its check-in", extra={"run_id": run_id, "by": by})

    async def _answer(self, run_id: str) -> pb.Run:
        """The run from the changing part of its row (``Store.run_head``) and its fixed part
        kept (``FixedRuns``, the dashboard's too), its config on the wire made once
        (``_wire``), off the event loop; its progress read on it (the runner's, which the loop
        changes). Before, each call read the row whole and converted its config: ~0.85 s with
        1,000,000 deny items (``MAX_DENY_ITEMS``), and ``fedhh admin wait`` asks every few
        seconds. Its version is read first: a change after it makes the next long-poll's
        answer come at once, not at its bound."""
        version = self.changes.version(run_id)
        progress = self.runner.progress_of(run_id)
        fixed = await self.fixed.get(self.store, run_id)
        if "wire" not in fixed.derived:
            await shared(self._wiring, run_id, self._wire, run_id, fixed)
        answer = await off_loop(self._answered, run_id, fixed, progress)
        answer.version = version
        return answer

    def _wire(self, run_id: str, fixed: RunFixed) -> pb.RunConfig:
        """``fixed``'s config as GetRun answers it, made once (a figure the wire cannot carry
        is damage too)."""
        wire = fixed.derived.get("wire")
        if wire is None:
            wire = decoded(f"run {run_id!r}", "config", to_proto, fixed.config)
            fixed.derived["wire"] = wire
        return wire

    def _answered(self, run_id: str, fixed: RunFixed, progress: pb.Progress | None) -> pb.Run:
        row, fixed = self.fixed.current(self.store, run_id, fixed)
        return _message(row, self._wire(run_id, fixed), self._rounds(run_id), progress)

    def _listed(self, run_id: str, state: str, progress: pb.Progress | None) -> pb.Run:
        """The run as GetRun answers it, less what can make it large: its attempts' summaries,
        its deny list and its codebook unless a built-in one's name (the JSON of up to 1 MiB).
        With them, a run weighed up to a few MiB (a deny list of 1,000 items of 1,000
        characters is 1 MB): 18 such runs passed gRPC's 16 MiB send limit and ListRuns failed
        for good, with no way to remove a run. GetRun answers the whole run. A run whose
        stored row is damaged is listed by its id and state with the damage as its error
        (GetRun answers it DATA_LOSS)."""
        try:
            return self._run(run_id, progress)
        except StoreDamaged as damage:
            return pb.Run(run_id=run_id, state=state, error=str(damage))

    def _run(self, run_id: str, progress: pb.Progress | None) -> pb.Run:
        """The run as listed: the changing part of its row (``Store.run_head``) and its config
        as listed, made once while kept (``_listed_configs``). Before, each ListRuns read
        every row whole and converted its config: ~1 s a run with 1,000,000 deny items."""
        head = self.store.run_head(run_id)
        key = (run_id, head.created_at)  # (another run of the id, created since, is another)
        with self._listed_lock:
            config = self._listed_configs.get(key)
            if config is not None:
                self._listed_configs.move_to_end(key)
        if config is None:
            config = decoded(f"run {run_id!r}", "config", to_proto,
                             dataclasses.replace(config_alone(self.store, head), deny_list=()))
            if config.codec not in BUILTIN_NAMES:
                config.ClearField("codec")
            with self._listed_lock:
                self._listed_configs[key] = config
                while len(self._listed_configs) > LISTED_CONFIGS:
                    self._listed_configs.popitem(last=False)
        return _message(head, config, (), progress)

    def _rounds(self, run_id: str) -> list[pb.RoundSummary]:
        return [decoded(f"round {r.round}.{r.attempt} of run {run_id!r}", "summary",
                        _round_summary, r) for r in self.store.rounds(run_id)]


def _same_run(run_id: str, kept: RunConfig, asked: RunConfig, how: str,
              planned: bool = False) -> None:
    """Refuse (ConflictError) a StartRun of ``run_id`` asking for ``asked`` where the run is
    ``kept``: another run's request. ``planned``: ``kept`` as stored, which holds fewer
    completion rounds than were asked for where too few devices budget them (``create_run``):
    a request of more is the same run, since planning it again drops the same ones."""
    if planned and kept.completion_rounds <= asked.completion_rounds:
        asked = dataclasses.replace(asked, completion_rounds=kept.completion_rounds)
    differ = [f.name for f in dataclasses.fields(RunConfig)
              if getattr(kept, f.name) != getattr(asked, f.name)]
    if differ:
        raise ConflictError(f"run {shown(run_id)} is already {how}, with another config "
                            f"({', '.join(differ)} differ): a StartRun of the same id and "
                            "config is answered that run; another run needs another id")


def _message(row: RunRow | RunHead, config: pb.RunConfig, rounds: Sequence[pb.RoundSummary],
             progress: pb.Progress | None) -> pb.Run:
    """The run as GetRun answers it (``config`` copied in)."""
    ledger = stored_ledger(row)
    return pb.Run(
        run_id=row.run_id, state=row.state, config=config, eps_local=row.eps_local,
        eps_spent=ledger.spent_epsilon(), rounds_released=ledger.rounds_recorded,
        error=row.error, rounds=rounds, progress=progress,
    )


def _round_summary(r: RoundRow) -> pb.RoundSummary:
    s: dict[str, Any] = r.summary
    return pb.RoundSummary(
        round=r.round, attempt=r.attempt, state=r.state, reason=r.reason,
        participants=r.participants, prefixes=int(s.get("prefixes", 0)),
        segment_bits=int(s.get("segment_bits", 0)),
        domain_size=int(s.get("domain_size", 0)), kept=int(s.get("kept", 0)),
        finished=int(s.get("finished", 0)), threshold=float(s.get("threshold", 0.0)),
        expected_false_positives=float(s.get("expected_false_positives", 0.0)),
        seconds=(r.finished_at - r.started_at) if r.finished_at is not None else 0.0,
        cut=int(s.get("cut", 0)), trimmed=int(s.get("trimmed", 0)),
        contributors=r.contributors if r.state == "released" else 0,
    )
