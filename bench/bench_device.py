"""Benchmark of one simulated device's CPU per stage on the load test's path, without a network.

A round of n devices (the coordinator's lying-server (k, t) at 10% expected dropout, device
authentication and the consistency check on, D = 4096) runs in one process: the server's
requests go through their wire form (``RequestEncoder``'s bytes, parsed) and each device
does what a load-test device does with them: parse the request, run ``SecAggDevice``'s stage
(every check included), and build, sign and serialise its call. Each device's CPU time
(``time.thread_time``) is summed per stage and reported per device, next to the cryptography
alone: the X25519 agreements, HKDF, AES-GCM share encryptions and decryptions, Ed25519 call
signatures and the mask expansions of one device, timed on their own between the devices' work,
and the ratio of the two (the code's share of a device's cost, whatever the machine's speed).
What a networked device adds beyond this (gRPC calls, TLS) the load test measures.

With ``--memory`` it reports instead what a device holds between stages: the bytes of the
Python objects reachable from its ``SecAggDevice`` after each stage. A load test's device
process holds this for each of its devices for the whole round, so it bounds how many one
machine simulates. (A lower bound: an instance whose attributes CPython 3.11 keeps inline,
not in a slot or a dict, is counted without them.)

Usage:
    .venv/bin/python bench/bench_device.py [--devices 1000] [--dim 4096] [--out FILE] [--memory]
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import os
import statistics
import sys
import time
import types
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "device")]

import numpy as np  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # noqa: E402
from reporting import publish  # noqa: E402

from fedhh.rpc.aggregator_wire import (  # noqa: E402
    CallKind,
    RequestEncoder,
    await_digest,
    consistency_digest,
    credentials,
    header_digest,
    keys_from_pb,
    keys_to_pb,
    request_from_pb,
    shares_digest,
    shares_from_pb,
    shares_to_pb,
    unmask_digest,
    unmask_from_pb,
    unmask_to_pb,
)
from fedhh.secagg import (  # noqa: E402
    ConsistencyResponse,
    DevicePolicy,
    MaskedInput,
    SecAggDevice,
    Stage,
)
from fedhh.secagg.params import Threat, choose_parameters  # noqa: E402
from fedhh.secagg.prg import MaskGenerator  # noqa: E402
from fedhh.secagg.primitives import aead_decrypt, aead_encrypt, agree, hkdf  # noqa: E402
from fedhh.secagg.simulate import make_cohort  # noqa: E402
from fedhh.v1 import aggregator_pb2 as pb  # noqa: E402
from fedhh_device.secagg_run import memoised_checks  # noqa: E402

POLICY = DevicePolicy(min_threshold=2, require_device_auth=True, require_consistency_check=True,
                      max_corrupt_fraction=0.05)


class CryptoFloor:
    """CPU seconds of one device's cryptography alone: 2k X25519 agreements, k HKDFs of the
    share keys and k of the mask keys, k AES-GCM encryptions and decryptions, ~6 Ed25519
    signatures, k + 1 mask expansions.

    Timed between the devices' own work (:meth:`interleave`), not once before or after it: on a
    machine whose speed drifts by a third within minutes (docs/benchmarks.md, "A slower
    machine") a floor timed apart put the same code at 1.15x and at 1.84x its cryptography in
    two runs; sampled as the devices' CPU accrues, floor and devices see the same phases, and
    their ratio is the code's."""

    def __init__(self, k: int, dim: int, modulus_bits: int, every_s: float = 0.25) -> None:
        self.k, self.every_s = k, every_s
        self._mine = X25519PrivateKey.generate()
        peer = X25519PrivateKey.generate().public_key()
        self._peer = peer.public_bytes_raw()
        self._parse = lambda raw: peer  # (a load-test process parses each key once)
        self._masks = MaskGenerator(dim, modulus_bits)
        self._acc = self._masks.zeros()
        self._signer = Ed25519PrivateKey.generate()
        self._owed = 0.0
        self.samples: list[float] = []

    def interleave(self, device_cpu_s: float) -> None:
        """Count ``device_cpu_s`` more of the devices' CPU; time one floor per ``every_s``."""
        self._owed += device_cpu_s
        while self._owed >= self.every_s or not self.samples:
            self._owed = max(self._owed - self.every_s, 0.0)
            self.samples.append(self.once())

    @property
    def seconds(self) -> float:
        return statistics.fmean(self.samples)

    def once(self) -> float:
        k, mine, peer_public, parse = self.k, self._mine, self._peer, self._parse
        masks, acc = self._masks, self._acc
        plaintext = bytes(74)
        started = time.thread_time()
        for _ in range(k):
            secret = agree(mine, peer_public, parse)
            agree(mine, peer_public, parse)
            key = hkdf(secret, salt=bytes(32), info=b"enc", length=64)
            hkdf(secret, salt=bytes(32), info=b"pair", length=16)
            blob = aead_encrypt(key[:32], plaintext, b"aad", os.urandom)
            aead_decrypt(key[:32], blob, b"aad")
        for _ in range(6):
            self._signer.sign(b"transcript")
        masks.add_many(acc, [bytes(16)] * (k + 1), [1] * (k + 1))
        return time.thread_time() - started


def run(n: int, dim: int, dropout: float, seed: int = 0,
        after_stage: Callable[[str, Iterable[SecAggDevice]], None] | None = None
        ) -> dict[str, object]:
    """The round; ``after_stage(name, devices)`` is called once every device has answered a
    stage."""
    params = choose_parameters(n, max(dropout, 0.05), 0.05, Threat.LYING)
    k, t = params.k, params.t
    cohort = make_cohort(n, dim, k, t, n_min=max(t, int(n * 0.7)), device_auth=True,
                         consistency_check=True, seed=seed)
    masks = MaskGenerator(dim, cohort.config.modulus_bits)
    server = cohort.server(masks=masks)
    checks = memoised_checks()  # (one round: its memo, as a load-test process keeps it)
    devices = {u: cohort.device(u, masks=masks, policy=POLICY, checks=checks)
               for u in range(1, n + 1)}
    rng = np.random.default_rng(seed)
    reports = {u: np.sort(rng.choice(dim, size=dim // 8, replace=False)).astype(np.int64)
               for u in devices}
    dropped = {int(u) for u in rng.choice(np.arange(1, n + 1), int(n * dropout), replace=False)}
    sid = cohort.session_id
    cpu: dict[str, float] = defaultdict(float)
    answered: dict[str, int] = defaultdict(int)
    by_device: dict[int, float] = defaultdict(float)

    floor = CryptoFloor(k, dim, cohort.config.modulus_bits)

    def timed(stage: str, u: int, call, *, answer: bool = True):
        started = time.thread_time()
        try:
            return call()
        finally:
            spent = time.thread_time() - started
            cpu[stage] += spent
            answered[stage] += answer
            by_device[u] += spent
            floor.interleave(spent)

    # Stage 0: the device advertises its keys (it signs nothing more: the admission proves it).
    for u, device in devices.items():
        wire = timed("advertise", u, lambda d=device: pb.AdvertiseKeysRequest(
            session_id=sid, keys=keys_to_pb(d.advertise_keys())).SerializeToString())
        message = pb.AdvertiseKeysRequest.FromString(wire)
        server.handle(Stage.ADVERTISE_KEYS, keys_from_pb(sid, message.keys))
    encoder = RequestEncoder()
    stages = ("share_keys", "masked_input", "consistency", "unmask")
    for name in stages:
        pending = server.close_stage()
        for u in sorted(pending):
            device = devices[u]
            if u in dropped and name == "masked_input":
                continue
            answer = encoder.ready(pending[u])

            def step(d=device, u=u, answer=answer, name=name):
                request = request_from_pb(sid, u, pb.AwaitStageResponse.FromString(answer))
                key, adm = cohort.identity_keys[u], d._admission
                if name == "share_keys":
                    message = d.share_keys(request)
                    creds = credentials(key, adm, CallKind.SHARES, sid, shares_digest(message))
                    return message, shares_to_pb(message, creds).SerializeToString()
                if name == "masked_input":
                    masked = d.masked_input(request, reports[u])
                    data = masked.vector_bytes()
                    digest = hashlib.sha256(data).digest()
                    creds = credentials(key, adm, CallKind.MASKED_INPUT, sid,
                                        header_digest(len(data), digest))
                    return masked, pb.MaskedVector(header=pb.MaskedInputHeader(
                        session_id=sid, credentials=creds, total_bytes=len(data),
                        vector_sha256=digest), data=data).SerializeToString()
                if name == "consistency":
                    signed = d.consistency_check(request)
                    creds = credentials(key, adm, CallKind.CONSISTENCY, sid,
                                        consistency_digest(signed))
                    return signed, pb.SubmitConsistencyRequest(
                        session_id=sid, signature=signed.signature,
                        credentials=creds).SerializeToString()
                shares = d.unmask(request)
                creds = credentials(key, adm, CallKind.UNMASK, sid, unmask_digest(shares))
                return shares, unmask_to_pb(shares, creds).SerializeToString()

            # Each later stage also costs the device one signed AwaitStage call, at most.
            timed(name, u, lambda u=u, d=device: credentials(
                cohort.identity_keys[u], d._admission, CallKind.AWAIT, sid,
                await_digest(Stage.SHARE_KEYS)), answer=False)
            message, wire = timed(name, u, step)
            if name == "share_keys":
                server.handle(Stage.SHARE_KEYS,
                              shares_from_pb(u, pb.SubmitSharesRequest.FromString(wire)))
            elif name == "masked_input":
                server.handle(Stage.MASKED_INPUT, MaskedInput.from_wire(
                    sid, u, message.vector_bytes(), cohort.config.modulus_bits))
            elif name == "consistency":
                server.handle(Stage.CONSISTENCY_CHECK, ConsistencyResponse(
                    sid, u, pb.SubmitConsistencyRequest.FromString(wire).signature))
            else:
                server.handle(Stage.UNMASK,
                              unmask_from_pb(u, pb.SubmitUnmaskRequest.FromString(wire)))
        if after_stage is not None:
            after_stage(name, devices.values())
    server.close_stage()
    if server.result is None:
        raise RuntimeError(f"the round did not release: {server.aborted}")
    per_device = {name: 1000 * cpu[name] / max(answered[name], 1)
                  for name in ("advertise", *stages)}
    total_ms = sum(per_device.values())
    # The fastest tenth of the devices that took part in every stage: each device's work is
    # the same, so this is the code's cost in the machine's faster moments, which a mean over
    # a drifting machine's slow ones hides (two codes compared with it differ by what they do).
    whole = sorted(1000 * s for u, s in by_device.items() if u not in dropped)
    return {"n": n, "k": k, "t": t, "dim": dim, "stage_ms": per_device, "total_ms": total_ms,
            "p10_ms": whole[len(whole) // 10],
            "crypto_ms": 1000 * floor.seconds, "crypto_samples": len(floor.samples),
            "over_crypto": total_ms / (1000 * floor.seconds)}


_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
              types.MethodType, types.CodeType, types.FrameType, functools._lru_cache_wrapper)


def held_by_devices(n: int, dim: int, dropout: float) -> tuple[dict[str, float], int]:
    """Bytes per device of the Python objects reachable from the round's ``SecAggDevice``s
    after each stage (``sys.getsizeof`` over ``gc.get_referents``, each object counted once
    for the whole cohort: what devices share, as the round config, is counted once; code,
    types and modules not at all; nor the memory OpenSSL holds for a key object), and k."""
    held: dict[str, float] = {}

    def measure(stage: str, devices: Iterable[SecAggDevice]) -> None:
        seen: set[int] = set()
        pending: list[object] = [vars(device) for device in devices]
        total = 0
        while pending:
            obj = pending.pop()
            if id(obj) in seen or isinstance(obj, _NOT_STATE):
                continue
            seen.add(id(obj))
            total += sys.getsizeof(obj)
            pending.extend(gc.get_referents(obj))
        held[stage] = total / n

    report = run(n, dim, dropout, after_stage=measure)
    return held, int(report["k"])  # type: ignore[call-overload]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=4096)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "device.md",
                        help="where the CPU report is written")
    parser.add_argument("--memory", action="store_true",
                        help="report the bytes a device holds after each stage, not CPU")
    args = parser.parse_args()
    if args.memory:
        held, k = held_by_devices(args.devices, args.dim, args.dropout)
        stages = ", ".join(f"after {name} {size / 1000:.1f} KB" for name, size in held.items())
        print(f"n = {args.devices}, k = {k}, D = {args.dim}: a device holds {stages}")
        return
    report = run(args.devices, args.dim, args.dropout)
    stages = ", ".join(f"{name} {ms:.2f}" for name, ms in report["stage_ms"].items())  # type: ignore[attr-defined]
    publish([f"n = {report['n']}, k = {report['k']}, t = {report['t']}, D = {report['dim']}: "
             f"{report['total_ms']:.2f} ms CPU per device ({stages}; the fastest tenth of the "
             f"devices {report['p10_ms']:.2f} or less); its cryptography alone "
             f"{report['crypto_ms']:.2f} ms (mean of {report['crypto_samples']} timings "
             f"between the devices' work): {report['over_crypto']:.2f}x its cryptography"],
            args.out)


if __name__ == "__main__":
    main()
