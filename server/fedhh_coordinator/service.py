"""Thin gRPC servicers of the coordinator: validation and translation only; the work is in
``Runner``, ``Lobby`` and ``Store``. Errors become status codes in ``fedhh.rpc.errors``."""

from __future__ import annotations

import asyncio
import re
import secrets
from typing import Any

import grpc
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.errors import AuthenticationError, ConfigError
from fedhh.mechanisms import LocalRandomizer, TailKind
from fedhh.prefixtree import PrefixTree, TreeState, shown_items
from fedhh.privacy import PrivacyLedger
from fedhh.rpc.errors import status_errors
from fedhh.secagg.primitives import KEY_BYTES, is_valid_x25519_public
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator import auth, metrics
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.settings import RunSettings
from fedhh_coordinator.store import Store

MAX_WAIT_MS = 30_000
RETRY_AFTER_MS = 1_000
RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class DeviceService(pb_grpc.DeviceServiceServicer):
    def __init__(self, store: Store, lobby: Lobby, key: Ed25519PrivateKey,
                 enrollment_token: bytes) -> None:
        self.store = store
        self.lobby = lobby
        self.public = auth.raw_public(key)
        self.enrollment_token = enrollment_token
        # Each device's last round keys that passed the checks: a device presents the same keys
        # at every poll until a task uses them, so each pair costs its X25519 checks once.
        self._checked_keys: dict[int, tuple[bytes, bytes]] = {}

    @status_errors
    async def Enroll(self, request: pb.EnrollRequest, context: grpc.aio.ServicerContext
                     ) -> pb.EnrollResponse:
        if not secrets.compare_digest(request.enrollment_token, self.enrollment_token):
            raise AuthenticationError("invalid enrollment token")
        if len(request.identity_public_key) != 32:
            raise ConfigError("identity_public_key must be a 32-byte Ed25519 public key")
        try:
            Ed25519PublicKey.from_public_bytes(request.identity_public_key)
        except ValueError:
            raise ConfigError("identity_public_key is not a valid Ed25519 key") from None
        if len(request.label.encode()) > 64:
            raise ConfigError("label must be at most 64 bytes")
        credential = auth.new_credential()
        device_id = self.store.add_device(auth.credential_hash(credential),
                                          request.identity_public_key, request.label)
        metrics.ENROLLED.inc()
        return pb.EnrollResponse(device_id=device_id, credential=credential,
                                 coordinator_public_key=self.public)

    @status_errors
    async def GetTask(self, request: pb.GetTaskRequest, context: grpc.aio.ServicerContext
                      ) -> pb.GetTaskResponse:
        device_id, credential = auth.parse_device_bearer(context.invocation_metadata())
        record = self.store.device(device_id)
        auth.verify_device(record[0] if record else None, credential)
        if request.device_id != device_id:
            raise AuthenticationError("device_id does not match the credential")
        round_keys = (bytes(request.c_pk), bytes(request.s_pk))
        if self._checked_keys.get(device_id) != round_keys:
            _check_round_keys(*round_keys)
            self._checked_keys[device_id] = round_keys
        wait_s = min(request.wait_ms or MAX_WAIT_MS, MAX_WAIT_MS) / 1000
        task = await self.lobby.wait_for_task(device_id, round_keys, wait_s,
                                              bytes(request.known_task))
        if task is None:
            metrics.TASKS.labels("wait").inc()
            return pb.GetTaskResponse(retry_after_ms=RETRY_AFTER_MS)
        metrics.TASKS.labels("task").inc()
        return pb.GetTaskResponse(task=task)


def _check_round_keys(c_pk: bytes, s_pk: bytes) -> None:
    """The round public keys a check-in presents, checked as the aggregator will check them."""
    if len(c_pk) != KEY_BYTES or len(s_pk) != KEY_BYTES:
        raise ConfigError(f"GetTask needs the device's round keys c_pk and s_pk, {KEY_BYTES} "
                          "bytes each")
    if c_pk == s_pk or not (is_valid_x25519_public(c_pk) and is_valid_x25519_public(s_pk)):
        raise ConfigError("the round keys must be two distinct X25519 keys, not of low order")


class AdminService(pb_grpc.AdminServiceServicer):
    def __init__(self, store: Store, runner: Runner, admin_token: bytes) -> None:
        self.store = store
        self.runner = runner
        self.admin_token = admin_token

    def _check(self, context: grpc.aio.ServicerContext) -> None:
        auth.check_admin(context.invocation_metadata(), self.admin_token)

    @status_errors
    async def StartRun(self, request: pb.StartRunRequest, context: grpc.aio.ServicerContext
                       ) -> pb.Run:
        self._check(context)
        settings = RunSettings.from_proto(request.config)
        settings.validate()
        run_id = request.run_id or secrets.token_hex(8)
        if not RUN_ID.match(run_id):
            raise ConfigError(f"run_id must match {RUN_ID.pattern}, got {run_id!r}")
        ledger = await asyncio.to_thread(
            PrivacyLedger.open, settings.eps_agg, settings.delta, settings.rounds,
            settings.min_devices, 1.0,
            **({"method": settings.privacy_method} if settings.privacy_method else {}),
            eps_local=settings.eps_local,
        )
        codec = Codec.from_spec(settings.codec, settings.max_bits)
        deny = np.unique(codec.encode_many(list(settings.deny_list)).codes)
        tree = PrefixTree(settings.tree(), codec,
                          LocalRandomizer(ledger.eps_local, TailKind(settings.tail)), deny)
        self.store.create_run(run_id, settings.to_dict(), ledger.eps_local,
                              tree.initial_state().to_dict(), ledger.to_dict(),
                              cw.to_ints(deny))
        self.runner.wake()
        return self._run(run_id)

    @status_errors
    async def GetRun(self, request: pb.GetRunRequest, context: grpc.aio.ServicerContext
                     ) -> pb.Run:
        self._check(context)
        return self._run(request.run_id)

    @status_errors
    async def ListRuns(self, request: pb.ListRunsRequest, context: grpc.aio.ServicerContext
                       ) -> pb.ListRunsResponse:
        self._check(context)
        return pb.ListRunsResponse(runs=[self._run(r.run_id) for r in self.store.runs()])

    @status_errors
    async def GetResults(self, request: pb.GetResultsRequest,
                         context: grpc.aio.ServicerContext) -> pb.Results:
        self._check(context)
        row = self.store.run(request.run_id)
        settings = RunSettings.from_dict(row.config)
        codec = Codec.from_spec(settings.codec, settings.max_bits)
        state = TreeState.from_dict(row.tree)
        ordered = sorted(state.discovered, key=lambda f: (-f.estimate, f.code))
        hitters = shown_items(codec, [(f.code, f.estimate, f.round) for f in ordered])
        return pb.Results(
            run_id=row.run_id, state=row.state,
            heavy_hitters=[pb.HeavyHitter(
                item=h.item, estimate=h.estimate, round=h.round,
                code=h.code if codec.max_bits <= 64 else 0, code_bytes=h.code_bytes,
                ended=h.ended, truncated=h.truncated, note=h.note) for h in hitters],
            deny_list=[codec.display_item(c) for c in row.deny_codes],
            ledger_json=_json(row.ledger), rounds=self._rounds(row.run_id),
        )

    @status_errors
    async def CancelRun(self, request: pb.CancelRunRequest, context: grpc.aio.ServicerContext
                        ) -> pb.Run:
        self._check(context)
        row = self.store.run(request.run_id)
        if row.state == "pending":
            self.store.set_run_state(row.run_id, "cancelled", "cancelled by the operator")
        elif row.state == "running":
            self.runner.cancel(row.run_id)
        return self._run(row.run_id)

    def _run(self, run_id: str) -> pb.Run:
        row = self.store.run(run_id)
        ledger = PrivacyLedger.from_dict(row.ledger)
        return pb.Run(
            run_id=row.run_id, state=row.state,
            config=RunSettings.from_dict(row.config).to_proto(), eps_local=row.eps_local,
            eps_spent=ledger.spent_epsilon(), rounds_released=ledger.rounds_recorded,
            error=row.error, rounds=self._rounds(run_id),
        )

    def _rounds(self, run_id: str) -> list[pb.RoundSummary]:
        out = []
        for r in self.store.rounds(run_id):
            s: dict[str, Any] = r.summary
            out.append(pb.RoundSummary(
                round=r.round, attempt=r.attempt, state=r.state, reason=r.reason,
                participants=r.participants, prefixes=int(s.get("prefixes", 0)),
                segment_bits=int(s.get("segment_bits", 0)),
                domain_size=int(s.get("domain_size", 0)), kept=int(s.get("kept", 0)),
                finished=int(s.get("finished", 0)), threshold=float(s.get("threshold", 0.0)),
                expected_false_positives=float(s.get("expected_false_positives", 0.0)),
                seconds=float(s.get("seconds", 0.0)),
            ))
        return out


def _json(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True)
