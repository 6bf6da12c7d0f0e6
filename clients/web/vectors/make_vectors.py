#!/usr/bin/env python3
"""Known-answer vectors from the Python library, for the TypeScript device (clients/web).

    python clients/web/vectors/make_vectors.py           # rewrite vectors/python.json
    python clients/web/vectors/make_vectors.py --check   # exit 1 if it differs (drift)

Everything is deterministic: byte streams come from fedhh's DeterministicRandom (AES-256-CTR
under a 32-byte key, recorded as ``stream_key`` so the TypeScript tests replay the same bytes),
and numpy draws from fixed seeds. Where a vector comes from a whole device (``device_rounds``),
it is the real :class:`fedhh.secagg.SecAggDevice` in a simulated cohort, not a restatement of its
formulas, so the TypeScript side is held to what the deployed Python device sends.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.codec import BUILTIN_NAMES, MAX_SUPPORTED_BITS, Codebook, Codec, train_codebook
from fedhh.device.randomizer import RandomizedResponse, a0_threshold
from fedhh.device.randomness import NumpySource
from fedhh.errors import AuthenticationError, PrivacyError
from fedhh.rpc.tasks import COHORT_TASK_CONTEXT, CohortTasks, verify_task
from fedhh.secagg import shamir
from fedhh.secagg.config import RoundConfig, SignedConfig, StageDeadlines, verify_config
from fedhh.secagg.graph import neighbours_of, ring_order, survivors_connected
from fedhh.secagg.merkle import (
    HASH_BYTES,
    IdentityTree,
    cohort_salt,
    leaf_hash,
    root_from_leaves,
    root_from_proof,
)
from fedhh.secagg.messages import (
    MaskedInputRequest,
    ShareKeysRequest,
    UnmaskRequest,
    consistency_transcript,
    survivors_digest,
)
from fedhh.secagg.prg import MaskGenerator, pair_mask_key, self_mask_key
from fedhh.secagg.primitives import (
    LABELS,
    DeterministicRandom,
    aead_encrypt,
    agree,
    ed25519_from_seed,
    ed25519_public_bytes,
    hkdf,
    is_valid_x25519_public,
    sha256,
    u32,
    x25519_from_seed,
    x25519_public_bytes,
)
from fedhh.secagg.simulate import make_cohort
from fedhh.v1 import coordinator_pb2 as pb

OUT = Path(__file__).resolve().parent / "python.json"
P25519 = (1 << 255) - 19
ED25519_ORDER = (1 << 252) + 27742317777372353535851937790883648493


def stream(label: str) -> DeterministicRandom:
    return DeterministicRandom(b"fedhh/web-vectors/" + label.encode())


def key_of(rand: DeterministicRandom) -> str:
    """The stream's AES-256-CTR key: what the TypeScript tests need to replay it."""
    return rand._key.hex()


def shamir_vectors() -> dict[str, Any]:
    cases: list[dict[str, Any]] = []
    secrets = [0, 1, (1 << 256) - 1]
    layouts = [(1, [1]), (2, [1, 2, 3]), (3, [2, 5, 7, 9]), (5, list(range(1, 9))),
               (4, [1, 100, 1000, 16777215]), (3, [9, 4, 1, 6])]
    for i, (t, xs) in enumerate(layouts):
        secret = secrets[i] if i < len(secrets) else int.from_bytes(stream(f"secret{i}")(32),
                                                                       "big")
        rand = stream(f"shamir{i}")
        key = key_of(rand)
        ys = shamir.share(secret, t, xs, rand)
        cases.append({"stream_key": key, "secret": f"{secret:064x}", "threshold": t, "xs": xs,
                      "ys": [shamir.encode_share(y).hex() for y in ys]})
    # Reconstruction from given points, including the failures the server must detect.
    reconstruct: list[dict[str, Any]] = []
    for case in cases:
        t = case["threshold"]
        points = list(zip(case["xs"], case["ys"], strict=True))[-t:]
        reconstruct.append({"points": [[x, y] for x, y in points], "secret": case["secret"]})
    big = (1 << 256) + 5  # a field element that is no 32-byte secret: a corrupt share
    ys = shamir.share(big, 2, [1, 2], stream("corrupt"))
    reconstruct.append({"points": [[1, shamir.encode_share(ys[0]).hex()],
                                   [2, shamir.encode_share(ys[1]).hex()]], "secret": None})
    reconstruct.append({"points": [[3, cases[2]["ys"][0]], [3, cases[2]["ys"][1]]],
                        "secret": None})  # a repeated x
    decode = [{"share": (shamir.PRIME - 1).to_bytes(33, "big").hex(), "valid": True},
              {"share": shamir.PRIME.to_bytes(33, "big").hex(), "valid": False},
              {"share": "00" * 32, "valid": False}]
    return {"share": cases, "reconstruct": reconstruct, "decode": decode}


def x25519_vectors() -> dict[str, Any]:
    seeds = [bytes(32), b"\xff" * 32, *(stream("x25519")(32) for _ in range(6))]
    pairs = []
    for a_seed, b_seed in zip(seeds[::2], seeds[1::2], strict=True):
        a, b = x25519_from_seed(a_seed), x25519_from_seed(b_seed)
        pairs.append({"seed_a": a_seed.hex(), "seed_b": b_seed.hex(),
                      "public_a": x25519_public_bytes(a).hex(),
                      "public_b": x25519_public_bytes(b).hex(),
                      "shared": agree(a, x25519_public_bytes(b)).hex()})
    # Public keys at the edges: small u, u near p and its non-canonical encodings (u + p),
    # the order-8 points, each with the ignored top bit set too, and ordinary keys.
    us = [*range(0, 20), P25519 - 1, P25519 - 2,
          *(P25519 + i for i in range(0, 19)),
          0x00b8495f16056286fdb1329ceb8d09da6ac49ff1fae35616aeb8413b7c7aebe0,
          0x57119fd0dd4e22d8868e1c58c45c44045bef839c55b1d0b1248c50a3bc959c5f]
    encodings = [u.to_bytes(32, "little") for u in us]
    encodings += [bytes(e[:31]) + bytes([e[31] | 0x80]) for e in encodings]
    encodings += [x25519_public_bytes(x25519_from_seed(stream("valid")(32))) for _ in range(4)]
    validity = [{"public": e.hex(), "valid": is_valid_x25519_public(e)} for e in encodings]
    return {"pairs": pairs, "validity": validity}


def hkdf_vectors() -> list[dict[str, Any]]:
    rand = stream("hkdf")
    out = []
    for length in (16, 32, 64, 100):
        ikm, salt, info = rand(32), rand(32), LABELS["pair"] + u32(3) + u32(length)
        out.append({"ikm": ikm.hex(), "salt": salt.hex(), "info": info.hex(), "length": length,
                    "okm": hkdf(ikm, salt=salt, info=info, length=length).hex()})
    return out


def mask_vectors() -> dict[str, Any]:
    rand = stream("masks")
    keys = []
    for device_id in (1, 2, 77, 16777216):
        b, sid = rand(32), rand(32)
        keys.append({"kind": "self", "secret": b.hex(), "session_id": sid.hex(), "u": device_id,
                     "key": self_mask_key(b, sid, device_id).hex()})
    for u, v in ((1, 2), (2, 1), (5, 300)):
        secret, sid = rand(32), rand(32)
        keys.append({"kind": "pair", "secret": secret.hex(), "session_id": sid.hex(), "u": u,
                     "v": v, "key": pair_mask_key(secret, sid, u, v).hex()})
    expansions = []
    # Small ones in full; large ones (beyond one 1 MiB WebCrypto chunk) by digest.
    for dimension, bits in ((1, 16), (1, 32), (7, 16), (8, 32), (9, 16), (100, 32), (1000, 16),
                            (300_000, 32), (700_001, 16)):
        key = rand(16)
        mask = MaskGenerator(dimension, bits).generate(key).astype(f"<u{bits // 8}").tobytes()
        entry: dict[str, Any] = {"key": key.hex(), "dimension": dimension, "bits": bits}
        if len(mask) <= 4096:
            entry["mask"] = mask.hex()
        else:
            entry["sha256"] = sha256(mask).hex()
        expansions.append(entry)
    return {"keys": keys, "expansions": expansions}


def aead_vectors() -> list[dict[str, Any]]:
    rand = stream("aead")
    out = []
    for size in (0, 1, 74, 200):
        key, plaintext, aad = rand(32), rand(size), rand(40)
        nonce_rand = stream(f"aead-nonce{size}")
        nonce_key = key_of(nonce_rand)
        out.append({"key": key.hex(), "plaintext": plaintext.hex(), "aad": aad.hex(),
                    "stream_key": nonce_key,
                    "blob": aead_encrypt(key, plaintext, aad, nonce_rand).hex()})
    return out


def device_round(modulus_bits: int, dimension: int, me: int) -> dict[str, Any]:
    """One device's messages in a real simulated round (n = 7, complete graph, t = 3)."""
    cohort = make_cohort(n=7, dimension=dimension, k=6, t=3, modulus_bits=modulus_bits,
                         seed=f"web-vectors-{modulus_bits}".encode())
    sid = cohort.session_id
    devices = {u: cohort.device(u) for u in range(1, 8)}
    adverts = {u: d.advertise_keys() for u, d in devices.items()}
    roster = tuple(adverts[u] for u in sorted(adverts))
    responses = {u: d.share_keys(ShareKeysRequest(sid, u, roster)) for u, d in devices.items()}
    incoming = tuple(s for r in responses.values() for s in r.shares if s.dst == me)
    ones = np.flatnonzero(np.random.default_rng(modulus_bits).random(dimension) < 0.3)
    masked = devices[me].masked_input(MaskedInputRequest(sid, me, incoming), ones)
    partners = [u for u in sorted(devices) if u != me]
    alive, dropped = tuple(partners[:4]), tuple(partners[4:])
    unmask = devices[me].unmask(UnmaskRequest(sid, me, alive, dropped))
    own = responses[me]
    return {
        "config": cohort.signed.payload.hex(),
        "config_signature": cohort.signed.signature.hex(),
        "coordinator_public": cohort.coordinator_public.hex(),
        "session_id": sid.hex(),
        "device_id": me,
        "stream_key": key_of(cohort.rand.spawn(b"device" + u32(me))),
        "advertise": {"c_pk": adverts[me].c_pk.hex(), "s_pk": adverts[me].s_pk.hex()},
        "peers": [{"id": a.device_id, "c_pk": a.c_pk.hex(), "s_pk": a.s_pk.hex()}
                  for a in roster if a.device_id != me],
        "shares_out": [{"dst": s.dst, "ciphertext": s.ciphertext.hex()} for s in own.shares],
        "b_commitment": own.b_commitment.hex(),
        "shares_in": [{"src": s.src, "ciphertext": s.ciphertext.hex()} for s in incoming],
        "ones": ones.tolist(),
        "masked_input": masked.vector.astype(f"<u{modulus_bits // 8}").tobytes().hex(),
        "alive": list(alive),
        "dropped": list(dropped),
        "b_shares": [[v, y.hex()] for v, y in unmask.b_shares],
        "s_shares": [[v, y.hex()] for v, y in unmask.s_shares],
    }


def consistency_vectors() -> list[dict[str, Any]]:
    rand = stream("consistency")
    out = []
    for survivors in ((1, 2, 3), (2, 5, 8, 13, 21, 34, 55, 89, 144)):
        seed, sid = rand(32), rand(32)
        key = ed25519_from_seed(seed)
        digest = survivors_digest(survivors)
        out.append({"identity_seed": seed.hex(), "identity_public": ed25519_public_bytes(key).hex(),
                    "session_id": sid.hex(), "device_id": survivors[1],
                    "survivors": list(survivors), "digest": digest.hex(),
                    "signature": key.sign(consistency_transcript(sid, survivors[1], digest)).hex()})
    return out


def randomizer_vectors() -> dict[str, Any]:
    grid = [1e-9, 2.0 ** -20, 5e-324, 0.01, 0.1, 0.1 + 0.2, 0.25, 0.5, 1.0, 1.5, 2.0, math.log(3),
            3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 22.0, 22.18, 22.2, 23.0, 40.0, 63.9,
            64.0, 1000.0]
    rng = np.random.default_rng(31)
    grid += [float(x) for x in rng.uniform(0.0, 24.0, size=60)]
    # Spread over magnitudes 2^-18 .. 2^5 without a transcendental function: numpy's exp picks
    # a SIMD kernel by CPU (AVX-512 or not), whose last bit differs, and the file must be the
    # same wherever it is made. (1 + m / 2^52) * 2^e is exact in binary64.
    grid += [math.ldexp(1.0 + int(m) / 2.0 ** 52, int(e))
             for m, e in zip(rng.integers(0, 2 ** 52, size=60), rng.integers(-18, 5, size=60),
                             strict=True)]
    thresholds = [{"eps": eps, "threshold0": a0_threshold(eps)} for eps in grid]
    cases = []
    for i, (eps, index, dim) in enumerate([(1.0, 3, 16), (0.1, None, 40), (8.0, 0, 50),
                                           (4.0, 99, 100), (0.5, 7, 1000), (2.0, None, 1)]):
        words = NumpySource(np.random.default_rng(100 + i)).uint32(dim)
        ones = RandomizedResponse(eps).randomize(index, dim,
                                                 NumpySource(np.random.default_rng(100 + i)))
        cases.append({"eps": eps, "index": index, "dim": dim, "words": words.tolist(),
                      "ones": ones.tolist()})
    return {"thresholds": thresholds, "randomize": cases}


def config_vectors() -> dict[str, Any]:
    rand = stream("configs")
    coordinator = Ed25519PrivateKey.from_private_bytes(rand(32))
    public = ed25519_public_bytes(coordinator)
    deadlines = StageDeadlines(1_700_000_000_000, 1_700_000_001_000, 1_700_000_002_000,
                               1_700_000_003_000, 1_700_000_004_000)
    configs = [
        RoundConfig(b"r1", 7, 37, 16, 4, 6, 3, rand(32), deadlines),
        RoundConfig(b"run-42/round-3/attempt-1", 100_000, 1 << 20, 32, 5_000, 40, 20, rand(32),
                    deadlines, device_auth=True, consistency_check=True, identity_root=rand(32)),
    ]
    signed = []
    for config in configs:
        payload = config.to_bytes()
        signature = coordinator.sign(payload)
        verify_config(SignedConfig(payload, signature), public)
        signed.append({
            "payload": payload.hex(), "signature": signature.hex(), "valid": True,
            "session_id": sha256(LABELS["session"], payload).hex(),
            "fields": {"round_id": config.round_id.hex(), "num_devices": config.num_devices,
                       "dimension": config.dimension, "modulus_bits": config.modulus_bits,
                       "n_min": config.n_min, "k": config.k, "t": config.t,
                       "graph_seed": config.graph_seed.hex(),
                       "deadlines": [str(d) for d in config.deadlines.as_tuple()],
                       "device_auth": config.device_auth,
                       "consistency_check": config.consistency_check,
                       "identity_root": config.identity_root.hex() if config.identity_root
                       else None}})
        bad = bytearray(signature)
        bad[5] ^= 1
        signed.append({"payload": payload.hex(), "signature": bytes(bad).hex(), "valid": False})
        # A task signature (context-prefixed) must not verify as this config's.
        signed.append({"payload": payload.hex(), "valid": False,
                       "signature": coordinator.sign(COHORT_TASK_CONTEXT + payload).hex()})
    # Malformed encodings, each signed: the signature holds, the parse must fail.
    base = bytearray(configs[0].to_bytes())
    head = len(LABELS["config"])
    body = head + 3 + len(b"r1")
    malformed = {
        "version 2": _patched(base, head, b"\x00\x02"),
        "trailing byte": bytes(base) + b"\x00",
        "truncated": bytes(base[:-1]),
        "unknown flag": _patched(base, body + 53, b"\x04"),
        "modulus 8": _patched(base, body + 8, b"\x08"),
        "k odd, not n-1": _patched(base, body + 13, u32(3)),
        "t > k": _patched(base, body + 17, u32(7)),
        "n_min 0": _patched(base, body + 9, u32(0)),
        "root without device_auth": _patched(base, len(base) - 1, b"\x01"),
        "deadlines decrease": _patched(base, body + 54, (2**62).to_bytes(8, "big")),
        "consistency without auth": _patched(base, body + 53, b"\x02"),
        "wrong label": _patched(base, 0, b"g"),
    }
    for name, payload in malformed.items():
        try:
            RoundConfig.from_bytes(payload)
        except Exception:
            pass
        else:
            raise SystemExit(f"malformed config '{name}' parsed in Python")
        signed.append({"name": name, "payload": payload.hex(), "valid": False,
                       "signature": coordinator.sign(payload).hex()})
    shared = pb.Task(run_id="run-42", round=3, attempt=1, prefix_bits=8,
                     prefixes=[1, 2, 250, (1 << 64) - 1], eps_local=4.0, codec="english",
                     max_bits=64, selection="uniform", round_config=configs[0].to_bytes(),
                     deadline_unix_ms=1_700_000_004_000,
                     round_config_signature=coordinator.sign(configs[0].to_bytes()))
    cohort = CohortTasks(shared, coordinator)

    def case(signed_task: pb.SignedTask, device_id: int, why: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "why": why, "task": signed_task.task.hex(), "device_id": str(device_id),
            "shared_length": signed_task.shared_length,
            "shared_signature": signed_task.shared_signature.hex()}
        try:
            task = verify_task(signed_task, public, device_id)
        except AuthenticationError:
            return {**entry, "valid": False}
        return {**entry, "valid": True, "fields": {
            **_task_fields(task), "run_id": task.run_id, "round": task.round,
            "attempt": task.attempt, "device_id": str(task.device_id),
            "secagg_id": task.secagg_id, "admission": task.admission.hex(),
            "deadline_unix_ms": str(task.deadline_unix_ms)}}

    first, second = cohort.task(12345, 4, b"\x11" * 64), cohort.task(99, 5, b"\x22" * 64)

    def altered(task: bytes = first.task, shared_signature: bytes = first.shared_signature,
                shared_length: int = first.shared_length) -> pb.SignedTask:
        """The first member's task with what a relay changed."""
        return pb.SignedTask(task=task, shared_signature=shared_signature,
                             shared_length=shared_length)

    length = first.shared_length
    flipped = bytearray(first.task)
    flipped[length // 2] ^= 1
    sig = bytearray(first.shared_signature)
    s = int.from_bytes(sig[32:], "little") + ED25519_ORDER
    tasks = [
        case(first, 12345, "a member's task"),
        case(second, 99, "another member's, under the same signature"),
        case(first, 99, "a member's task taken by another device"),
        case(altered(task=bytes(flipped)), 12345, "a byte of the shared part changed"),
        case(altered(task=first.task + pb.Task(eps_local=9.0).SerializeToString()),
             12345, "the unsigned part overrides a shared field"),
        case(altered(task=first.task + b"\x00"), 12345, "a byte after the own part"),
        case(altered(shared_length=len(first.task) + 1), 12345,
             "the shared part longer than the task"),
        case(altered(shared_length=length - 1), 12345, "the shared part cut short"),
        case(altered(shared_signature=coordinator.sign(first.task[:length])), 12345,
             "signed without the context"),
        case(altered(shared_signature=bytes(sig[:32]) + s.to_bytes(32, "little")),
             12345, "S + L: the same signature with a non-canonical S"),
    ]
    # A shared part that sets a member's own field, signed as it is: refused all the same.
    stray = shared.SerializeToString() + pb.Task(secagg_id=7).SerializeToString()
    own = pb.Task(device_id=12345, secagg_id=4).SerializeToString()
    tasks.append(case(pb.SignedTask(
        task=stray + own, shared_length=len(stray),
        shared_signature=coordinator.sign(COHORT_TASK_CONTEXT + stray)), 12345,
        "the signed part sets a member's own field"))
    if [c["valid"] for c in tasks] != [True, True] + [False] * (len(tasks) - 2):
        raise SystemExit("the task vectors' verdicts in Python are not the expected ones")
    return {"coordinator_public": public.hex(), "configs": signed, "tasks": tasks}


def graph_vectors() -> dict[str, Any]:
    """Ring orders, neighbourhoods and survivor connectivity of H(k, n)."""
    rand = stream("graph")
    rng = np.random.default_rng(7)
    orders, neighbourhoods, connectivity = [], [], []
    for n, k in ((2, 1), (5, 4), (9, 2), (10, 4), (64, 8), (1000, 30), (5000, 40)):
        seed = rand(32)
        order = ring_order(seed, n)
        entry: dict[str, Any] = {"graph_seed": seed.hex(), "n": n}
        if n <= 64:
            entry["order"] = order.tolist()
        else:
            entry["sha256"] = sha256(order.astype(">u4").tobytes()).hex()
        orders.append(entry)
        for u in sorted({1, n, *rng.integers(1, n + 1, size=3).tolist()}):
            neighbourhoods.append({"graph_seed": seed.hex(), "n": n, "k": k, "device_id": u,
                                   "neighbours": list(neighbours_of(seed, n, k, u))})
        for fraction in (0.2, 0.5, 0.8, 0.95) if n <= 1000 else ():
            survivors = sorted(int(i) for i in np.flatnonzero(rng.random(n) < fraction) + 1)
            connectivity.append({"graph_seed": seed.hex(), "n": n, "k": k,
                                 "survivors": survivors,
                                 "connected": survivors_connected(seed, n, k, survivors)})
    if all(c["connected"] for c in connectivity) or not any(c["connected"] for c in connectivity):
        raise SystemExit("the connectivity vectors need both outcomes")
    return {"orders": orders, "neighbours": neighbourhoods, "connectivity": connectivity}


def _misshapen(n: int, leaves: list[bytes], positions: list[int], proof: bytes,
               root: bytes) -> list[dict[str, Any]]:
    """Multiproofs of ``positions`` (``proof`` the right one) in shapes a lying server might
    send, each with the root Python's verifier computes from them (None: refused), so that the
    TypeScript verifier is held to the same verdict: a hash too many or too few, the hashes
    reversed (each used at another level or side), a position twice, out of order or out of
    range, no position. A position outside the tree holds a zero leaf."""
    def case(ps: list[int], pf: bytes) -> dict[str, Any]:
        got = root_from_leaves(n, [(p, leaves[p] if 0 <= p < n else bytes(HASH_BYTES))
                                   for p in ps], pf)
        assert got != root or (ps, pf) == (positions, proof)
        return {"positions": ps, "proof": pf.hex(), "root": None if got is None else got.hex()}
    hashes = [proof[i:i + HASH_BYTES] for i in range(0, len(proof), HASH_BYTES)]
    cases = [case(positions, proof + bytes(HASH_BYTES)), case(positions, proof + root),
             case([*positions, positions[-1]], proof), case([n], b""), case([], b"")]
    if hashes:
        cases += [case(positions, proof[:-HASH_BYTES]), case(positions, proof[HASH_BYTES:])]
    if len(hashes) > 1:
        cases.append(case(positions, b"".join(reversed(hashes))))
    if len(positions) > 1:
        cases.append(case(positions[::-1], proof))
    return cases


def merkle_vectors() -> dict[str, Any]:
    """Cohort trees (each member's leaf position, its proof, multiproofs for runs and
    scattered sets of positions, and misshapen multiproofs with Python's verdict on each) and
    admissions from a device_auth cohort. The sizes include powers of two and their
    neighbours, where the carried odd nodes change."""
    rand = stream("merkle")
    trees = []
    for n in (1, 2, 3, 5, 8, 13, 37, 7, 9, 16, 17, 31, 33):
        round_id, seed = b"round-" + str(n).encode(), rand(32)
        members = [(rand(32), rand(32), rand(32)) for _ in range(n)]
        tree = IdentityTree(round_id, seed, members)
        positions = [tree.position(u) for u in range(1, n + 1)]
        proofs = [tree.proof(u).hex() for u in range(1, n + 1)]
        salt = cohort_salt(round_id, seed, n)
        assert all(root_from_proof(salt, n, positions[u - 1], u, members[u - 1],
                                   bytes.fromhex(proofs[u - 1])) == tree.root
                   for u in range(1, n + 1))
        picks = int.from_bytes(rand(8), "big")
        sets = [list(range(n)), [n - 1], sorted({(picks >> i) % n for i in range(0, 40, 5)}),
                sorted({*range(max(0, n - 3), n), *range(min(n, 3))})]
        multiproofs = [{"positions": ps, "proof": tree.prove(ps).hex()} for ps in sets]
        leaves = [leaf_hash(salt, u, members[u - 1]) for u in ring_order(seed, n).tolist()]
        misshapen = _misshapen(n, leaves, sets[2], tree.prove(sets[2]), tree.root)
        trees.append({"round_id": round_id.hex(), "graph_seed": seed.hex(), "n": n,
                      "salt": salt.hex(), "root": tree.root.hex(),
                      "members": [[k.hex() for k in m] for m in members], "positions": positions,
                      "proofs": proofs, "multiproofs": multiproofs,
                      "misshapen": misshapen})
    cohort = make_cohort(n=6, dimension=10, k=4, t=2, device_auth=True, consistency_check=True,
                         seed=b"web-vectors-auth")
    admissions = [{"device_id": a.device_id, "identity_key": a.identity_key.hex(),
                   "c_pk": a.c_pk.hex(), "s_pk": a.s_pk.hex(), "proof": a.proof.hex()}
                  for a in (cohort.admissions[u] for u in range(1, 7))]
    return {"trees": trees, "cohort": {"config": cohort.signed.payload.hex(),
                                       "admissions": admissions}}


CODEC_ITEMS = [
    "a", "e", "hello", "the", "zebra", "quizzically", "Hello", "HELLO world", "don't",
    "co-operate", "x" * 40, "abcdefghijklmnopqrstuvwxyz",
    "Straße", "Grüße", "Äpfel und Öl", "schön", "Fußgängerübergänge",
    "こんにちは", "日本語", "東京都", "カタカナ", "한국어", "中文", "Ελληνικά", "русский", "सरकार",
    "ภาษาไทย",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇩🇪", "a😀b", "🙂🙃🙂",
    "https://www.example.com", "http://example.org/path?q=1&r=2#frag", "www.google.com",
    "https://de.wikipedia.org/wiki/Stra%C3%9Fe", "example.co.uk",
    "alice@example.com", "bob.smith+tag@gmail.com", "user@mail.example.de",
    "0", "42", "3.14159", "-17", "1,000,000", "+1 (555) 010-9999", "2026-11-27",
    " ", "  leading", "trailing ", "tab\there", "new\nline", "\x00", "\x7f", "\x80",
    "quote\"s", "back\\slash", "~!@#$%^&*()_+{}|:<>?", "\u00e9", "e\u0301",
    "\u2028", "\ufeff", "\U0010ffff", "\uffff",
    "Supercalifragilisticexpialidocious and more words to be truncated at max_bits",
    # right-to-left text and the bidi controls a browser passes through (RLM, LRE..RLO, RLI..PDI)
    "שלום", "مرحبا بالعالم", "עברית 123 English", "\u200fא\u200e", "\u202eevil.exe\u202c",
    "\u2067مرحبا\u2069 ok", "https://example.com/\u05e9\u05dc\u05d5\u05dd?\u0642=\u0633",
    # a long URL as a browser's address bar holds it (3,000 characters)
    "https://www.example.com/search?q=" + "long%20query%20" * 198 + "&utm=1",
    # astral CJK, a tag-sequence flag, variation selectors (VS15; VS17 in plane 14), combining
    # stacks and a lone mark, decomposed Hangul, a lone ZWJ and a ZWNJ, C0 and C1 controls
    # (U+0085 is whitespace to Python's str.split, not to JavaScript's), private use, a
    # noncharacter, Arabic with harakat, a Devanagari conjunct, and 240 bytes of emoji
    "\U00020bb7野家", "\U00029e3d",
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
    "\u263a\ufe0e", "\u845b\U000e0100", "Z\u0324\u0354\u0367a\u0308\u0356", "\u0301",
    "\u1112\u1161\u11ab", "\u200d", "a\u200cb", "\x01\x1b[31m\x1f", "\x85", "\x9f", "a\x00b",
    "\ue000\U000f0000", "\ufdd0", "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627",
    "\u0915\u094d\u0937", "\U0001f600" * 60,
]
CODEC_BITS = (8, 20, 60, 64, 65, 128, 300, 1500)
# Families of items that are prefixes of one another, where a token book's canonical writing
# could differ at the item's end (`10` of `100`, `.com` of `.com/`, `n't` of `don't`), each
# encoded at its own code's length and a bit either side: the end symbol just fits, is cut, or
# leaves one bit of padding
PREFIX_FAMILIES = [
    "https://x.com", "https://x.com/", "https://x.com/a", "https://x.com/a?b=1",
    "https://x.com/a?b=1&c=2", "https://", "https://www.", "https://www.x.com/", "www.", ".com",
    ".com/", "1", "10", "100", "1000", "10000", "2017", "20", "201", "20170", "0.5", "0.50",
    ".14", "3.14", "3.141", "+1", "+1-", "+1-555", "a@b.c", "a@b.co", "a@b.com", "@gmail.com",
    "a@gmail.com", "a@gmail.co", "a@gmail.comm", "@", "👍", "👍🏽", "👩", "👩\u200d", "👩\u200d💻",
    "🇺", "🇺🇸", "🇺🇸🇬", "🇺🇸🇬🇧", "1\ufe0f", "1\ufe0f\u20e3", "e", "\u00e9", "e\u0301", "the",
    "there", "therefore", "n't", "don", "don'", "don't", "ß", "ßß", "😂", "😂😂",
]
BOUNDARY_SPECS = ("unicode", "general", "tokens", "english")


def codec_vectors() -> dict[str, Any]:
    """Every built-in codec on many kinds of items and widths, an inline codebook, the books'
    keys, and codebooks and items Python refuses."""
    books = {name: Codec(name).book for name in BUILTIN_NAMES}
    trained = train_codebook([("kaffee", 3.0), ("kuchen", 2.0), ("tee", 1.0), ("ß", 1.0)],
                             "inline-test", description="a small trained book",
                             floor_bytes=[ord(c) for c in "abcdefghijklmnopqrstuvwxyz"])
    six = [format(i, "06b") for i in range(64)]  # a 6-bit code with tokens, ties included
    inline = Codebook("inline-tokens", six[26], six[27],
                      {ord("a") + i: six[i] for i in range(26)}, "6-bit letters and tokens",
                      {b"kaffee": six[28], b"ee": six[29],
                       "ß".encode(): six[30], b"tee": six[31],
                       b"ab": six[32] + "000000",  # as long as a + b: the token wins
                       b"abc": six[33] + "0" * 12, "😀".encode(): six[34]})
    specs = [*BUILTIN_NAMES, trained.spec, inline.spec]
    cases = []
    for spec in specs:
        for bits in CODEC_BITS:
            codec = Codec(spec, bits)
            encoded = codec.encode_many(CODEC_ITEMS)
            cases.append({"spec": spec, "max_bits": bits,
                          "codes": [format(c, "x") for c in cw_ints(encoded.codes)],
                          "lengths": encoded.lengths.tolist(),
                          "truncated": encoded.truncated.tolist()})
    boundaries = []
    for spec in BOUNDARY_SPECS:
        lengths = Codec(spec, MAX_SUPPORTED_BITS).encode_many(PREFIX_FAMILIES).lengths.tolist()
        for at, (item, length) in enumerate(zip(PREFIX_FAMILIES, lengths, strict=True)):
            for bits in (length - 1, length, length + 1):
                encoded = Codec(spec, bits).encode_many([item])
                boundaries.append({"spec": spec, "item": at, "max_bits": bits,
                                   "code": format(cw_ints(encoded.codes)[0], "x"),
                                   "length": int(encoded.lengths[0]),
                                   "truncated": bool(encoded.truncated[0])})
    for spec in specs:  # the slow reference agrees with the fast encoder
        book = Codec(spec, 60).book
        for item in CODEC_ITEMS + PREFIX_FAMILIES:
            widest = MAX_SUPPORTED_BITS  # (a longer item is cut)
            reference = book.item_bits(item)[:widest]
            if Codec(spec, widest).encode(item) >> (widest - len(reference)) != int(reference, 2):
                raise SystemExit(f"item_bits and encode differ for {item!r} in {spec[:20]}")
    refused_items = []
    for item in ("", "\ud800", "a\udc00b"):
        try:
            Codec("unicode").encode(item)
        except Exception:
            refused_items.append(item)
        else:
            raise SystemExit(f"Python encoded {item!r}")
    keys = {name: book.key for name, book in books.items()}
    keys["inline"] = inline.key
    base = json.loads(books["english"].to_json())
    bad_books: dict[str, Any] = {
        "unknown key": {**base, "colour": "red"},
        "version 3": {**base, "version": 3},
        "tokens in version 1": {**base, "tokens": {"ab": "0"}},
        "not prefix-free": {**base, "end": base["bytes"]["e"] + "0"},
        "byte twice": {**base, "bytes": {**base["bytes"], "0x65": "1"}},
        "bad byte key": {**base, "bytes": {**base["bytes"], "0x6G": "1"}},
        "upper-case hex key": {**base, "bytes": {**base["bytes"], "0xFF": "1"}},
        "no escape": {**base, "escape": None},
        "codeword too long": {**base, "end": "0" * 49},
        "codeword not bits": {**base, "end": "012"},
        "bad name": {**base, "name": "-x"},
        "description not a string": {**base, "description": 3},
        "bytes null": {**base, "bytes": None},
        "one-byte token": {**base, "version": 2, "tokens": {"a": "1"}},
        "raw continuations not a boolean": {**base, "raw_continuations": 1},
        "raw continuations with a continuation codeword": {
            **base, "raw_continuations": True, "bytes": {**base["bytes"], "0x80": "1" * 30}},
        "not a dict": [1, 2],
    }
    refused_books = []
    for name, data in bad_books.items():
        try:
            Codebook.from_dict(data)
        except Exception:
            refused_books.append({"name": name, "json": json.dumps(data, ensure_ascii=False)})
        else:
            raise SystemExit(f"Python accepted the bad codebook '{name}'")
    return {"items": CODEC_ITEMS, "cases": cases, "prefix_families": PREFIX_FAMILIES,
            "boundaries": boundaries, "keys": keys, "refused_items": refused_items,
            "refused_books": refused_books}


class _Recorded:
    """A RandomSource that hands out given draws and words and records what was asked."""

    def __init__(self, draws: list[int], words: list[int] | None = None) -> None:
        self.draws = list(draws)
        self.words = words
        self.highs: list[int] = []

    def below(self, highs: np.ndarray) -> np.ndarray:
        self.highs += [int(h) for h in np.asarray(highs)]
        out, self.draws = self.draws[: len(highs)], self.draws[len(highs):]
        return np.array(out, dtype=np.int64)

    def uint32(self, size: int) -> np.ndarray:
        if self.words is None or len(self.words) != size:
            raise SystemExit(f"the recorded words do not cover {size} draws")
        return np.array(self.words, dtype=np.uint32)


SELECTION_ITEMS = ["apple", "apricot", "avocado", "banana", "blueberry", "cherry", "äpfel",
                   "apfelstrudel", "😀", "https://example.com/a", "a", "ab", "zz", "kaffee"]


def _selection_task(codec: str, max_bits: int, prefix_bits: int, prefixes: list[int],
                    segment_bits: int, deny: list[int], rule: str, conditioned: bool,
                    dimension: int | None = None, eps: float = 2.0) -> pb.Task:
    from fedhh.codec import codes as cw
    size = len(prefixes) << segment_bits
    config = RoundConfig(b"sel", 7, dimension or max(size, 1), 16, 4, 6, 3, bytes(32),
                         StageDeadlines(1, 2, 3, 4, 5))
    return pb.Task(run_id="run-sel", round=2, prefix_bits=prefix_bits,
                   prefixes=cw.to_wire(cw.from_ints(prefixes, prefix_bits), prefix_bits)
                   if prefixes else [],
                   deny_list=cw.to_wire(cw.from_ints(deny, max_bits), max_bits) if deny else [],
                   segment_bits=segment_bits, eps_local=eps, codec=codec, max_bits=max_bits,
                   selection=rule, prefix_conditioning=conditioned,
                   round_config=config.to_bytes())


def _task_fields(task: pb.Task) -> dict[str, Any]:
    return {"codec": task.codec, "max_bits": task.max_bits, "prefix_bits": task.prefix_bits,
            "prefixes": [str(w) for w in task.prefixes], "segment_bits": task.segment_bits,
            "deny_list": [str(w) for w in task.deny_list], "selection": task.selection,
            "prefix_conditioning": task.prefix_conditioning, "eps_local": task.eps_local,
            "round_config": task.round_config.hex()}


def selection_vectors() -> dict[str, Any]:
    """Item selection and the one-hot index as the Python device computes them
    (fedhh_device.report.make_report), with recorded draws; whole reports with recorded
    words; and tasks the device refuses."""
    from fedhh.codec import codes as cw
    from fedhh.device import Eligibility, Selection, SelectionRule, select_block
    from fedhh_device.report import DeviceData, make_report, query_of
    rng = np.random.default_rng(15)
    cases = []
    for codec_name, max_bits in (("english", 60), ("5bit", 20), ("unicode", 64), ("tokens", 100),
                                 ("bytes", 130), ("huffman", 64)):
        codec = Codec(codec_name, max_bits)
        for prefix_bits, segment_bits in ((0, 3), (4, 2), (8, 4), (min(70, max_bits - 6), 6)):
            for rule in ("uniform", "weighted"):
                for conditioned in (True, False):
                    take = sorted(set(rng.choice(len(SELECTION_ITEMS), size=6, replace=False)
                                      .tolist()))
                    items = [SELECTION_ITEMS[i] for i in take]
                    counts = rng.integers(0, 6, size=len(items)).tolist()
                    codes = cw.to_ints(codec.encode_many(items).codes)
                    heads = sorted({c >> (max_bits - prefix_bits) for c in codes})
                    keep = [h for h in heads if rng.random() < 0.6] or heads[:1]
                    others = [int(x) for x in rng.integers(0, 1 << min(prefix_bits, 62), size=3)]
                    prefixes = sorted(set(keep + others)) if prefix_bits else [0]
                    deny = sorted({codes[0]} if rng.random() < 0.5 else set())
                    task = _selection_task(codec_name, max_bits, prefix_bits, prefixes,
                                           segment_bits, deny, rule, conditioned)
                    query = query_of(task)
                    selection = Selection(SelectionRule(rule), conditioned)
                    array = codec.encode_many(items).codes
                    eligibility = Eligibility.of(array, query.round_filter())
                    probe = _Recorded([0])
                    select_block(np.array([0, len(items)]), np.arange(len(items)),
                                 np.array(counts), eligibility, selection, probe)
                    total = probe.highs[0] if probe.highs else None
                    outcomes = []
                    for draw in sorted({0, *(rng.integers(0, total, size=3).tolist()),
                                        total - 1}) if total else [None]:
                        chosen = select_block(np.array([0, len(items)]), np.arange(len(items)),
                                              np.array(counts), eligibility, selection,
                                              _Recorded([] if draw is None else [draw]))
                        entry = int(chosen[0]) if chosen[0] >= 0 else None
                        index = None
                        if entry is not None:
                            domain = query.domain_index(array[entry : entry + 1],
                                                        eligibility.prefix_index[entry : entry + 1])
                            index = int(domain[0]) if domain[0] >= 0 else None
                        outcomes.append({"draw": draw, "entry": entry, "index": index})
                    cases.append({"items": items, "counts": counts, "task": _task_fields(task),
                                  "total": total, "outcomes": outcomes})
    if not any(o["index"] is None and o["draw"] is not None
               for c in cases for o in c["outcomes"]):
        raise SystemExit("the selection vectors need an unconditioned draw off the list")
    reports = []
    for i, case in enumerate(cases[::5]):
        task = _selection_task(case["task"]["codec"], case["task"]["max_bits"],
                               case["task"]["prefix_bits"], [], 1, [], "uniform", True)
        task = pb.Task(**{**{f.name: getattr(task, f.name) for f in pb.Task.DESCRIPTOR.fields
                             if f.name not in ("prefixes", "deny_list")}})
        task.prefixes.extend(int(w) for w in case["task"]["prefixes"])
        task.deny_list.extend(int(w) for w in case["task"]["deny_list"])
        task.segment_bits = case["task"]["segment_bits"]
        task.selection = case["task"]["selection"]
        task.prefix_conditioning = case["task"]["prefix_conditioning"]
        task.round_config = RoundConfig(b"sel", 7, query_of(task).domain_size, 16, 4, 6, 3,
                                        bytes(32), StageDeadlines(1, 2, 3, 4, 5)).to_bytes()
        task.eps_local = [0.5, 1.0, 4.0][i % 3]
        draws = [case["outcomes"][-1]["draw"]] if case["total"] else []
        words = rng.integers(0, 1 << 32, size=query_of(task).domain_size,
                             dtype=np.uint64).tolist()
        ones = make_report(DeviceData(tuple(case["items"]), np.array(case["counts"])), task,
                           _Recorded(draws, words))
        reports.append({"items": case["items"], "counts": case["counts"],
                        "task": _task_fields(task), "draws": draws, "words": words,
                        "ones": ones.tolist()})
    good = _selection_task("english", 60, 4, [1, 5], 2, [], "uniform", True)
    broken: dict[str, dict[str, Any]] = {
        "prefixes not ascending": dict(prefixes=[5, 1]),
        "prefixes repeated": dict(prefixes=[5, 5]),
        "no prefixes": dict(prefixes=[]),
        "prefix wider than prefix_bits": dict(prefixes=[1, 16]),
        "deny list not ascending": dict(deny_list=[9, 3]),
        "deny code wider than max_bits": dict(deny_list=[1 << 60]),
        "segment_bits 0": dict(segment_bits=0),
        "prefix_bits + segment_bits > max_bits": dict(prefix_bits=58, prefixes=[1], segment_bits=3),
        "max_bits 0": dict(max_bits=0),
        f"max_bits {MAX_SUPPORTED_BITS + 1}": dict(max_bits=MAX_SUPPORTED_BITS + 1),
        "unknown selection": dict(selection="random"),
        "unknown codec": dict(codec="klingon"),
        "dimension is not the domain": dict(round_config=RoundConfig(
            b"sel", 7, 9, 16, 4, 6, 3, bytes(32), StageDeadlines(1, 2, 3, 4, 5)).to_bytes()),
        "two-word values, odd count": dict(max_bits=100, deny_list=[1, 2, 3], prefix_bits=4),
    }
    refused = []
    for name, change in broken.items():
        task = pb.Task()
        task.CopyFrom(good)
        for key, value in change.items():
            if isinstance(value, list):
                task.ClearField(key)
                getattr(task, key).extend(value)
            else:
                setattr(task, key, value)
        try:
            make_report(DeviceData(("apple",), np.array([1])), task, _Recorded([0], [0] * 8))
        except Exception:
            refused.append({"name": name, "task": _task_fields(task)})
        else:
            raise SystemExit(f"Python accepted the broken task '{name}'")
    return {"cases": cases, "reports": reports, "refused": refused}


def _policy_decision(n: int, k: int, t: int, dropout: float, corrupt: float,
                     bits: float) -> bool:
    """Whether the Python device's _check_policy accepts (n, k, t) at these floors."""
    from fedhh.secagg.device import DevicePolicy, _check_policy
    from fedhh.secagg.errors import SecAggAbort
    config = RoundConfig(b"bound", n, 1, 16 if n < 1 << 16 else 32, 1, k, t, bytes(32),
                         StageDeadlines(1, 2, 3, 4, 5))
    policy = DevicePolicy(max_corrupt_fraction=corrupt, security_bits=bits,
                          assumed_dropout=dropout)
    try:
        _check_policy(config, policy)
    except SecAggAbort:
        return False
    return True


def floor_vectors() -> dict[str, Any]:
    """The lying-server bound (privacy + disconnection) of many (n, k, t) as the Python device
    computes it, with its decision: the parameters the coordinator chooses (just below the
    target), their neighbours t - 1 and t + 1, random configs, large cohorts, complete graphs,
    and targets set at the bound itself (decisions that flip within any tolerance)."""
    from fedhh.secagg.params import Threat, choose_parameters, failure_bounds
    def bound(n: int, k: int, t: int, dropout: float, corrupt: float) -> float:
        b = failure_bounds(n, k, t, dropout, corrupt, Threat.LYING)
        return b.privacy + b.disconnection
    rng = np.random.default_rng(40)
    raw: list[tuple[int, int, int, float, float, float]] = []
    for n in (10, 50, 100, 500, 1000, 5000, 100_000):
        for dropout, corrupt in ((0.3, 0.05), (0.1, 0.2), (0.05, 0.0)):
            for bits in (20.0, 40.0):
                try:
                    chosen = choose_parameters(n, dropout, corrupt, Threat.LYING,
                                               security_bits=bits)
                except Exception:
                    continue
                k, t = chosen.k, chosen.t
                for tt in {t - 1, t, t + 1} & set(range(1, k + 1)):
                    raw.append((n, k, tt, dropout, corrupt, bits))
    for _ in range(60):
        n = int(rng.integers(3, 200_000))
        k = min(n - 1, 2 * int(rng.integers(1, 400)))
        if k % 2 and k != n - 1:
            k -= 1
        t = int(rng.integers(1, k + 1))
        raw.append((n, k, t, float(rng.choice([0.0, 0.1, 0.3, 0.5])),
                    float(rng.choice([0.0, 0.01, 0.05, 0.1, 0.25])),
                    float(rng.choice([10.0, 20.0, 40.0, 40.5, 80.0]))))
    for n, k, t in ((1 << 24, 200, 150), (1 << 24, 2000, 1400), (5_000_000, 1000, 700),
                    (4001, 4000, 3000), (300, 299, 200), (3, 2, 2), (2, 1, 1)):
        raw.append((n, k, t, 0.3, 0.05, 40.0))
    cases: list[dict[str, Any]] = []
    for n, k, t, dropout, corrupt, bits in raw:
        cases.append({"n": n, "k": k, "t": t, "dropout": dropout, "corrupt": corrupt,
                      "security_bits": bits, "bound": bound(n, k, t, dropout, corrupt),
                      "accept": _policy_decision(n, k, t, dropout, corrupt, bits)})
    # Targets at the bound itself: 2^-bits just above, at, and just below the bound.
    for case in [c for c in cases if 0 < c["bound"] < 1][::7]:
        exact = -math.log2(case["bound"])
        for bits in (exact * (1 - 1e-13), exact, exact * (1 + 1e-13)):
            if not 0 < bits <= 256:
                continue
            cases.append({**case, "security_bits": bits,
                          "accept": _policy_decision(case["n"], case["k"], case["t"],
                                                     case["dropout"], case["corrupt"], bits)})
    decisions = {c["accept"] for c in cases}
    if decisions != {True, False}:
        raise SystemExit("the floor vectors need both decisions")
    return {"bounds": cases}


def budget_vectors() -> dict[str, Any]:
    """The device's lifetime budget (fedhh_device.budget.DeviceBudget) over a sequence of tasks
    at given times: reports, retries answered alike, refusals; and query digests."""
    from fedhh_device.budget import DeviceBudget, query_digest
    clock = [0.0]
    budget = DeviceBudget.load(None, 3.0, 100.0)
    budget.clock = lambda: clock[0]
    base: dict[str, Any] = dict(codec="english", max_bits=60, prefix_bits=4, prefixes=[1, 5],
                                segment_bits=2, selection="uniform", prefix_conditioning=True)
    steps: list[tuple[float, str, int, float, dict[str, Any]]] = [
             (0.0, "A", 1, 1.0, {}), (1.0, "A", 1, 1.0, {}),
             (2.0, "A", 1, 1.0, {"prefixes": [1, 6]}), (2.5, "A", 1, 2.0, {}),
             (3.0, "B", 1, 1.5, {}), (4.0, "C", 1, 0.6, {}), (5.0, "C", 1, 0.5, {}),
             (6.0, "A", 2, 0.1, {}), (101.0, "D", 1, 1.0, {}), (102.0, "D", 1, 1.0, {}),
             (103.0, "E", 1, 0.0, {}), (103.5, "E", 1, -1.0, {}), (104.0, "F", 3, 0.1, {}),
             (105.0, "G", 1, 0.2, {}), (106.0, "H", 1, 1e-9, {}), (300.0, "H", 1, 1e-9, {})]
    out = []
    for i, (at, run, round_, eps, change) in enumerate(steps):
        clock[0] = at
        fields = {**base, **change}
        task = pb.Task(run_id=run, round=round_, eps_local=eps, **fields)
        try:
            ones = budget.report(task, functools.partial(np.array, [i, i + 10])).tolist()
            outcome: Any = ones
        except Exception as error:
            outcome = type(error).__name__
        out.append({"at": at, "task": {**fields, "run_id": run, "round": round_,
                                        "eps_local": eps},
                    "outcome": outcome, "spent_after": budget.spent()})
    if len({str(o["outcome"]) for o in out}) < 5:
        raise SystemExit("the budget vectors need more kinds of outcome")
    digests = []
    for eps in (4.0, 0.1, 1e-05, 0.0001, 1e16, 1e15, 123456789.123, 5e-324, 1.7976931348623157e308,
                2.5, 1 / 3, 100.0, 1e22, 0.30000000000000004):
        task = pb.Task(run_id="run-ü", round=7, prefix_bits=70, prefixes=[1, 2, 3, 2**64 - 1],
                       deny_list=[5, 2**63], segment_bits=3, eps_local=eps, codec="tokens",
                       max_bits=128, selection="weighted", prefix_conditioning=bool(eps > 1))
        digests.append({"task": {"run_id": task.run_id, "round": task.round,
                                 "prefix_bits": task.prefix_bits,
                                 "prefixes": [str(p) for p in task.prefixes],
                                 "deny_list": [str(p) for p in task.deny_list],
                                 "segment_bits": task.segment_bits, "eps_local": eps,
                                 "codec": task.codec, "max_bits": task.max_bits,
                                 "selection": task.selection,
                                 "prefix_conditioning": task.prefix_conditioning},
                        "repr": repr(eps), "digest": query_digest(task)})
    return {"cap": 3.0, "period_s": 100.0, "steps": out, "digests": digests,
            "clock_steps": budget_clock_steps(base), "refusals": budget_refusals(base)}


def budget_refusals(base: dict[str, Any]) -> list[dict[str, Any]]:
    """A spent budget's refusal as the Python device words it (its numbers formatted by
    ``:.4g`` and ``:g``), for caps, spends and asks whose formatting is Python's own: exponents
    below -4 and past the precision, ties rounded half to even, subnormals, infinity (a string:
    JSON has none). Then refusals whose float sum is within the cap, which give the exact sum,
    the excess and a charge's binary value (``exceeds_in_words``): ten of 0.1 under 1.0, a sum
    whose digits all fit, sums in Decimal's exponent notation, a subnormal excess, a first
    charge that is its decimal; and a sum past the largest double (math.fsum's OverflowError),
    worded as a float sum above the cap."""
    from fedhh_device.budget import DeviceBudget
    cases: list[tuple[float, list[float], float]] = [
        (100.0, [10.6661] * 9, 10.6661), (1e-05, [1e-05], 1e-05), (1e6, [999999.5], 10.0),
        (3.0, [2.5], 10.125), (2.5, [1.0, 1.0625], 1.0), (1e300, [1e300], 1e300),
        (3.0, [2.0], math.inf), (123456.7, [123456.7], 0.1), (5e-324, [5e-324], 5e-324),
        (0.3001, [0.1, 0.2], 0.00012345), (9.9999999, [9.9999], 0.099995),
        (1.0, [0.1] * 9, 0.1), (2.0**53, [2.0**53], 1.0), (1e300, [1e300], 1e283),
        (1e-300, [1e-300], 1e-320), (1.0, [0.5, 0.4], 0.1),
        (sys.float_info.max, [sys.float_info.max], sys.float_info.max)]
    out = []
    for cap, spends, ask in cases:
        budget = DeviceBudget.load(None, cap, 100.0)
        budget.clock = lambda: 0.0
        for i, eps in enumerate(spends):
            budget.report(pb.Task(run_id=f"s{i}", round=1, eps_local=eps, **base),
                          functools.partial(np.array, [i]))
        try:
            budget.report(pb.Task(run_id="ask", round=1, eps_local=ask, **base),
                          functools.partial(np.array, [0]))
        except PrivacyError as error:
            message = str(error)
        else:
            raise SystemExit(f"the budget of {cap} took {ask} after {spends}")
        out.append({"cap": cap, "spends": spends,
                    "eps_local": ask if math.isfinite(ask) else repr(ask), "message": message})
    return out


def budget_clock_steps(base: dict[str, Any]) -> list[dict[str, Any]]:
    """The budget (cap 3, period 100) under a wrong clock: each step's device clock, the task's
    signed last deadline (0: none), its outcome, the epsilon counted by the device clock after
    it, and the runs whose reports are kept (spends dated max(clock, deadline), counted against
    min(clock, deadline) - period; reports kept while their round's spend is)."""
    from fedhh_device.budget import DeviceBudget
    clock = [0.0]
    budget = DeviceBudget.load(None, 3.0, 100.0)
    budget.clock = lambda: clock[0]
    steps: list[tuple[float, int, str, int, float]] = [
        (1000.0, 0, "A", 1, 2.0),             # the clock right, no deadline
        (700.0, 1_050_000, "B", 1, 1.0),      # the clock 350 behind: B dated 1050
        (1090.0, 1_090_000, "C", 1, 1.0),     # corrected: A and B still counted, refused
        (1300.0, 1_095_000, "C", 1, 1.0),     # the clock 200 ahead: "now" is 1095, refused
        (900.0, 1_095_000, "C", 1, 1.0),      # the clock jumped back: refused
        (1095.0, 1_400_000, "C", 1, 1.0),     # a deadline far ahead: "now" is 1095, refused
        (1120.0, 1_120_000, "C", 1, 1.0),     # A out of the period: C spends, A's report goes
        (1120.0, 1_120_000, "C", 1, 1.0),     # a retry: the same report
        (1200.0, 1_200_000, "D", 1, 0.5),     # B out of the period: its report goes
        (1200.0, 1_200_000, "D", 2, 0.5),     # D's next round: its report replaces round 1's
        (1200.0, 1_200_000, "D", 1, 0.5),     # round 1 again, its report gone: refused
    ]
    out = []
    for i, (at, deadline_ms, run, round_, eps) in enumerate(steps):
        clock[0] = at
        task = pb.Task(run_id=run, round=round_, eps_local=eps, deadline_unix_ms=deadline_ms,
                       **base)
        try:
            outcome: Any = budget.report(task, functools.partial(np.array, [i])).tolist()
        except Exception as error:
            outcome = type(error).__name__
        out.append({"clock": at, "deadline_unix_ms": deadline_ms, "run_id": run,
                    "round": round_, "eps_local": eps, "outcome": outcome,
                    "spent_after": budget.spent(), "reports": sorted(budget.reports)})
    return out


def cw_ints(codes: np.ndarray) -> list[int]:
    from fedhh.codec import codes as cw
    return cw.to_ints(codes)


def _patched(data: bytearray, offset: int, value: bytes) -> bytes:
    out = bytearray(data)
    out[offset:offset + len(value)] = value
    return bytes(out)


def build() -> dict[str, Any]:
    return {
        "about": "generated by clients/web/vectors/make_vectors.py; do not edit",
        "shamir": shamir_vectors(),
        "x25519": x25519_vectors(),
        "hkdf": hkdf_vectors(),
        "masks": mask_vectors(),
        "aead": aead_vectors(),
        "device_rounds": [device_round(16, 37, 2), device_round(32, 300, 6)],
        "consistency": consistency_vectors(),
        "randomizer": randomizer_vectors(),
        "signed": config_vectors(),
        "graph": graph_vectors(),
        "merkle": merkle_vectors(),
        "codec": codec_vectors(),
        "selection": selection_vectors(),
        "floors": floor_vectors(),
        "budget": budget_vectors(),
    }


def render() -> str:
    return json.dumps(build(), indent=1) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if python.json is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
