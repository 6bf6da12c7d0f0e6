"""TypeScript devices in Python rounds (not a test module): :class:`TypeScriptDevice` has the
methods of :class:`fedhh.secagg.SecAggDevice` that a round driver calls, and forwards each call
to the real TypeScript device (clients/web/src/device.ts) in a node process
(clients/web/test/bridge.ts), converting the messages both ways. A TypeScript abort comes back
as the :class:`SecAggAbort` with the same reason."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.secagg.config import Admission, SignedConfig
from fedhh.secagg.device import DevicePolicy, RoundKeys
from fedhh.secagg.errors import AbortReason, InvalidReport, SecAggAbort
from fedhh.secagg.messages import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencyResponse,
    EncryptedShare,
    MaskedInput,
    MaskedInputRequest,
    ShareKeysRequest,
    ShareKeysResponse,
    UnmaskRequest,
    UnmaskResponse,
)


class NodeDevices:
    """One node process hosting any number of TypeScript devices (one request at a time)."""

    def __init__(self, node: str, dist: Path) -> None:
        self._process = subprocess.Popen([node, str(dist / "test" / "bridge.js")],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, bufsize=1)

    def call(self, message: dict[str, Any]) -> Any:
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the node bridge exited ({process.wait()})")
        answer = json.loads(line)
        if "abort" in answer:
            raise SecAggAbort(AbortReason(answer["abort"]), answer["detail"])
        if "invalid_report" in answer:
            raise InvalidReport(answer["invalid_report"])
        if "error" in answer:
            raise RuntimeError(f"TypeScript device: {answer['error']}")
        return answer["ok"]

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)


def _admission_out(a: Admission | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {"device_id": a.device_id, "identity_key": a.identity_key.hex(), "c_pk": a.c_pk.hex(),
            "s_pk": a.s_pk.hex(), "proof": a.proof.hex()}


def _admission_in(a: dict[str, Any] | None) -> Admission | None:
    if a is None:
        return None
    return Admission(a["device_id"], bytes.fromhex(a["identity_key"]), bytes.fromhex(a["c_pk"]),
                     bytes.fromhex(a["s_pk"]), bytes.fromhex(a["proof"]))


def _advert_out(e: AdvertiseKeys) -> dict[str, Any]:
    return {"session_id": e.session_id.hex(), "device_id": e.device_id, "c_pk": e.c_pk.hex(),
            "s_pk": e.s_pk.hex(), "admission": _admission_out(e.admission)}


def _shares_out(shares: tuple[EncryptedShare, ...]) -> list[dict[str, Any]]:
    return [{"src": s.src, "dst": s.dst, "ciphertext": s.ciphertext.hex()} for s in shares]


class TypeScriptDevice:
    """A SecAggDevice look-alike whose every answer the TypeScript device computes."""

    def __init__(self, bridge: NodeDevices, signed: SignedConfig, coordinator_public: bytes,
                 device_id: int, modulus_bits: int, *, policy: DevicePolicy | None = None,
                 identity_seed: bytes | None = None, admission: Admission | None = None,
                 round_keys: RoundKeys | None = None) -> None:
        self.bridge, self.device_id, self.modulus_bits = bridge, device_id, modulus_bits
        wire_policy = None if policy is None else {
            "min_threshold": policy.min_threshold, "min_n_min": policy.min_n_min,
            "max_dimension": policy.max_dimension,
            "require_device_auth": policy.require_device_auth,
            "require_consistency_check": policy.require_consistency_check,
            "max_corrupt_fraction": policy.max_corrupt_fraction,
            "security_bits": policy.security_bits, "assumed_dropout": policy.assumed_dropout}
        keys = None if round_keys is None else {"c": round_keys.c_key.private_bytes_raw().hex(),
                                                "s": round_keys.s_key.private_bytes_raw().hex()}
        bridge.call({"op": "create", "id": device_id, "config": signed.payload.hex(),
                     "signature": signed.signature.hex(),
                     "coordinator_public": coordinator_public.hex(), "policy": wire_policy,
                     "identity_seed": None if identity_seed is None else identity_seed.hex(),
                     "admission": _admission_out(admission), "round_keys": keys})

    def _call(self, op: str, **fields: Any) -> Any:
        return self.bridge.call({"op": op, "id": self.device_id, **fields})

    def advertise_keys(self) -> AdvertiseKeys:
        e = self._call("advertise")
        return AdvertiseKeys(bytes.fromhex(e["session_id"]), e["device_id"],
                             bytes.fromhex(e["c_pk"]), bytes.fromhex(e["s_pk"]),
                             _admission_in(e["admission"]))

    def share_keys(self, request: ShareKeysRequest) -> ShareKeysResponse:
        out = self._call("share_keys", request={
            "session_id": request.session_id.hex(), "device_id": request.device_id,
            "roster": [_advert_out(e) for e in request.roster],
            "range_proof": request.range_proof.hex()})
        shares = tuple(EncryptedShare(s["src"], s["dst"], bytes.fromhex(s["ciphertext"]))
                       for s in out["shares"])
        return ShareKeysResponse(bytes.fromhex(out["session_id"]), out["device_id"], shares,
                                 bytes.fromhex(out["b_commitment"]))

    def masked_input(self, request: MaskedInputRequest, ones: np.ndarray) -> MaskedInput:
        out = self._call("masked_input", ones=[int(i) for i in ones], request={
            "session_id": request.session_id.hex(), "device_id": request.device_id,
            "shares": _shares_out(request.shares)})
        return MaskedInput.from_wire(bytes.fromhex(out["session_id"]), out["device_id"],
                                     bytes.fromhex(out["vector"]), self.modulus_bits)

    def consistency_check(self, request: ConsistencyRequest) -> ConsistencyResponse:
        out = self._call("consistency", request={
            "session_id": request.session_id.hex(), "device_id": request.device_id,
            "survivors": list(request.survivors)})
        return ConsistencyResponse(bytes.fromhex(out["session_id"]), out["device_id"],
                                   bytes.fromhex(out["signature"]))

    def unmask(self, request: UnmaskRequest) -> UnmaskResponse:
        out = self._call("unmask", request={
            "session_id": request.session_id.hex(), "device_id": request.device_id,
            "alive": list(request.alive), "dropped": list(request.dropped),
            "signatures": [[w, sig.hex()] for w, sig in request.signatures]})
        return UnmaskResponse(bytes.fromhex(out["session_id"]), out["device_id"],
                              tuple((v, bytes.fromhex(y)) for v, y in out["b_shares"]),
                              tuple((v, bytes.fromhex(y)) for v, y in out["s_shares"]))
