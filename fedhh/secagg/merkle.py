"""The coordinator's commitment to a round's cohort: a Merkle tree over each member's keys.

With ``device_auth`` every neighbour must learn which X25519 round keys belong to a device id,
and the aggregator which Ed25519 identity key signs the device's calls, without trusting the
aggregator that forwards the keys. Each device presents fresh round public keys (c_pk, s_pk)
when it checks in; the coordinator builds one Merkle tree per round over the leaves

    leaf_i = SHA-256(LEAF_LABEL || salt || u32(i) || identity_key_i || c_pk_i || s_pk_i)
                                                                        for i = 1..n
    node   = SHA-256(NODE_LABEL || left || right)

where ``salt = SHA-256(SALT_LABEL || u32(len(round_id)) || round_id || graph_seed || u32(n))``
ties every leaf to this round (a proof from another round, even for the same cohort and keys,
does not verify), and puts the 32-byte root in the signed round config (``identity_root``). A
device's admission is its keys and its inclusion proof: the sibling hashes on the path from its
leaf to the root, bottom up. Anyone holding the config checks an admission by recomputing the
root: about log2(n) SHA-256 calls, microseconds, instead of Ed25519 verifications of a key
signature and of a coordinator statement per neighbour.

Shape: level 0 holds the n leaves in id order; each level pairs nodes (0, 1), (2, 3), ...; an odd
last node is carried up unchanged. The shape depends only on n (signed), so the verifier knows
exactly which levels of a leaf's path have a sibling and accepts only a proof of exactly that
many hashes. The two labels have the same length and differ in content, and leaves and nodes
are fixed-length inputs, so no leaf encoding is a node encoding (no second-preimage games
between levels).
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import sha256 as _sha256

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.primitives import KEY_BYTES, LABELS, sha256, u32

__all__ = [
    "HASH_BYTES",
    "IdentityTree",
    "Member",
    "cohort_salt",
    "leaf_hash",
    "proof_hashes",
    "root_from_proof",
]

HASH_BYTES = 32
# A member's keys: (Ed25519 identity key, X25519 c_pk, X25519 s_pk), raw 32-byte encodings.
Member = tuple[bytes, bytes, bytes]
_LEAF = LABELS["merkle-leaf"]
_NODE = LABELS["merkle-node"]


def cohort_salt(round_id: bytes, graph_seed: bytes, n: int) -> bytes:
    """The per-round value every leaf hash includes."""
    return sha256(LABELS["merkle-salt"], u32(len(round_id)), round_id, graph_seed, u32(n))


def leaf_hash(salt: bytes, device_id: int, keys: Member) -> bytes:
    return sha256(_LEAF, salt, u32(device_id), *keys)


def _node(left: bytes, right: bytes) -> bytes:
    return _sha256(_NODE + left + right).digest()


def proof_hashes(n: int, device_id: int) -> int:
    """How many sibling hashes the proof of ``device_id`` in a tree of ``n`` leaves holds."""
    index, size, count = device_id - 1, n, 0
    while size > 1:
        if index ^ 1 < size:
            count += 1
        index >>= 1
        size = (size + 1) >> 1
    return count


def _well_formed(keys: object) -> bool:
    return (isinstance(keys, tuple) and len(keys) == 3
            and all(isinstance(k, bytes) and len(k) == KEY_BYTES for k in keys))


def root_from_proof(salt: bytes, n: int, device_id: int, keys: Member,
                    proof: bytes) -> bytes | None:
    """The root that ``proof`` leads to from the leaf (device_id, keys), or None if the inputs
    are malformed (an id outside 1..n, a key that is not 32 bytes, a proof that is not exactly
    the expected number of hashes)."""
    if (not isinstance(device_id, int) or isinstance(device_id, bool) or not 1 <= device_id <= n
            or not _well_formed(keys) or not isinstance(proof, bytes)
            or len(proof) != HASH_BYTES * proof_hashes(n, device_id)):
        return None
    h = leaf_hash(salt, device_id, keys)
    index, size, pos = device_id - 1, n, 0
    while size > 1:  # (the hot loop of every neighbour check: plain hashlib calls)
        if index ^ 1 < size:
            sibling = proof[pos:pos + HASH_BYTES]
            pos += HASH_BYTES
            h = _sha256(_NODE + sibling + h if index & 1 else _NODE + h + sibling).digest()
        index >>= 1
        size = (size + 1) >> 1
    return h


class IdentityTree:
    """The coordinator's tree over a cohort: ``members[i - 1]`` holds device i's keys."""

    def __init__(self, round_id: bytes, graph_seed: bytes, members: Sequence[Member]) -> None:
        n = len(members)
        if n < 1:
            raise SecAggConfigError("the cohort is empty")
        for i, keys in enumerate(members, start=1):
            if not _well_formed(keys):
                raise SecAggConfigError(f"device {i} needs three {KEY_BYTES}-byte keys "
                                        "(identity, c_pk, s_pk)")
        self.n = n
        self.salt = cohort_salt(round_id, graph_seed, n)
        self._members = tuple(members)
        level = [leaf_hash(self.salt, i, keys) for i, keys in enumerate(members, start=1)]
        self._levels = [level]
        while len(level) > 1:
            paired = [_node(level[j], level[j + 1]) for j in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                paired.append(level[-1])
            level = paired
            self._levels.append(level)
        self.root = level[0]

    def member(self, device_id: int) -> Member:
        return self._members[device_id - 1]

    def proof(self, device_id: int) -> bytes:
        """The inclusion proof of ``device_id`` (its admission)."""
        if not 1 <= device_id <= self.n:
            raise SecAggConfigError(f"device_id must be in [1, {self.n}], got {device_id}")
        index, parts = device_id - 1, []
        for level in self._levels[:-1]:
            if index ^ 1 < len(level):
                parts.append(level[index ^ 1])
            index >>= 1
        return b"".join(parts)
