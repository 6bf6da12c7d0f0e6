"""The coordinator's commitment to a round's cohort: a Merkle tree over each member's keys.

With ``device_auth`` every neighbour must learn which X25519 round keys belong to a device id,
and the aggregator which Ed25519 identity key signs the device's calls, without trusting the
aggregator that forwards the keys. Each device presents fresh round public keys (c_pk, s_pk)
when it checks in; the coordinator builds one Merkle tree per round over the leaves

    leaf(i) = SHA-256(LEAF_LABEL || salt || u32(i) || identity_key_i || c_pk_i || s_pk_i)
    node    = SHA-256(NODE_LABEL || left || right)

where ``salt = SHA-256(SALT_LABEL || u32(len(round_id)) || round_id || graph_seed || u32(n))``
ties every leaf to this round (a proof from another round, even for the same cohort and keys,
does not verify), and puts the 32-byte root in the signed round config (``identity_root``).

Leaves are in RING order: position p (0-based) holds the leaf of the device at ring position p
of the round's neighbour graph (:func:`fedhh.secagg.graph.ring_order`, from the same
graph_seed), so a device's neighbours, the k/2 ring positions on each side of its own, are one
run of consecutive leaves (two where the run wraps). Each level pairs nodes (0, 1), (2, 3), ...;
an odd last node is carried up unchanged. The shape depends only on n (signed).

A proof for a set S of positions (a multiproof) is the hashes of the nodes a verifier holding
S's leaves cannot compute: level by level from the leaves up, and within a level in increasing
index, the sibling of every node it holds whose sibling it neither holds nor can carry (the
sibling exists and is not itself computed from S). Which nodes those are depends on n and S
alone, so the verifier knows exactly how many hashes to expect and accepts no other length. A
device's admission is the proof for S = {its position} (its path's siblings, bottom up: about
log2(n) hashes); a device's roster is the proof for S = its own and its listed neighbours'
positions, which the device derives from their ids and the signed graph seed, never from the
message: its own and every neighbour's keys for ~2 log2(n) hashes instead of k x log2(n). A
neighbour the server does not list (one that did not advertise keys) is simply not in S: its
leaf, or a subtree of such leaves, is one of the proof's hashes, and nothing the device accepts.
The two labels have the same length and differ in content, and leaves and nodes are
fixed-length inputs, so no leaf encoding is a node encoding (no second-preimage games between
levels); a root from S's leaves equal to the signed one means each leaf is the committed one at
its position, or SHA-256 has a collision.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from hashlib import sha256 as _sha256
from typing import TypeGuard

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.graph import ring_positions
from fedhh.secagg.primitives import KEY_BYTES, LABELS, sha256, u32

__all__ = [
    "HASH_BYTES",
    "IdentityTree",
    "Member",
    "ProofNodes",
    "cohort_salt",
    "leaf_hash",
    "proof_hashes",
    "root_from_leaves",
    "root_from_proof",
    "well_formed_keys",
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


def _runs(positions: Sequence[int]) -> list[list[int]]:
    """Strictly increasing ``positions`` as maximal runs [first, last] of consecutive ones."""
    runs: list[list[int]] = []
    for p in positions:
        if runs and runs[-1][1] + 1 == p:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return runs


def _proof_nodes(n: int, runs: list[list[int]]) -> list[tuple[int, int]]:
    """(level, index) of each hash of the proof for the leaves of ``runs`` (maximal runs
    [first, last] of consecutive positions, increasing, in [0, n)), in proof order (module
    docstring). A run of held nodes needs at most its left end's sibling (an odd index: its
    left neighbour) and its right end's (an even index with a node right of it); the runs'
    parents are the next level's held nodes, merged where they meet. O(runs x log n), not
    O(|S| x log n): a worker makes one per device."""
    size, level, out = n, 0, []
    while size > 1:
        above: list[list[int]] = []
        for first, last in runs:
            if first & 1:
                out.append((level, first - 1))
            if not last & 1 and last + 1 < size:
                out.append((level, last + 1))
            first, last = first >> 1, last >> 1
            if above and above[-1][1] + 1 >= first:
                above[-1][1] = max(above[-1][1], last)
            else:
                above.append([first, last])
        runs, size, level = above, (size + 1) >> 1, level + 1
    return out


def _increasing(positions: Sequence[int], n: int) -> bool:
    return (len(positions) > 0 and all(isinstance(p, int) and not isinstance(p, bool)
                                       for p in positions)
            and positions[0] >= 0 and positions[-1] < n
            and all(a < b for a, b in itertools.pairwise(positions)))


def proof_hashes(n: int, positions: Sequence[int]) -> int:
    """How many hashes the proof for ``positions`` (strictly increasing, in [0, n)) holds."""
    return len(_proof_nodes(n, _runs(positions)))


def root_from_leaves(n: int, leaves: Sequence[tuple[int, bytes]], proof: bytes) -> bytes | None:
    """The root that ``proof`` leads to from ``leaves`` ((position, leaf hash) pairs, positions
    strictly increasing in [0, n)), or None if the inputs are malformed (no leaf, positions out
    of order or range, a proof that is not exactly the hashes n and the positions imply)."""
    positions = [p for p, _ in leaves]
    if (not isinstance(n, int) or n < 1 or not _increasing(positions, n)
            or not isinstance(proof, bytes)
            or len(proof) != HASH_BYTES * proof_hashes(n, positions)):
        return None
    level, size, pos = list(leaves), n, 0
    while size > 1:  # (the hot loop of every roster check: plain hashlib calls)
        above, j, held = [], 0, len(level)
        while j < held:
            i, h = level[j]
            if not i & 1 and j + 1 < held and level[j + 1][0] == i + 1:
                above.append((i >> 1, _sha256(_NODE + h + level[j + 1][1]).digest()))
                j += 2
                continue
            if i ^ 1 < size:
                sibling = proof[pos:pos + HASH_BYTES]
                pos += HASH_BYTES
                h = _sha256(_NODE + sibling + h if i & 1 else _NODE + h + sibling).digest()
            above.append((i >> 1, h))
            j += 1
        level, size = above, (size + 1) >> 1
    return level[0][1]


def well_formed_keys(keys: object) -> TypeGuard[Member]:
    """True iff ``keys`` is a :data:`Member`: a tuple of three ``KEY_BYTES``-byte strings."""
    return (isinstance(keys, tuple) and len(keys) == 3
            and all(isinstance(k, bytes) and len(k) == KEY_BYTES for k in keys))


def root_from_proof(salt: bytes, n: int, position: int, device_id: int, keys: Member,
                    proof: bytes) -> bytes | None:
    """The root that the admission ``proof`` leads to from device ``device_id``'s leaf at
    ``position``, or None if the inputs are malformed (a key that is not 32 bytes, a position
    outside [0, n), a proof of the wrong length)."""
    if (not well_formed_keys(keys) or not isinstance(device_id, int) or not isinstance(n, int)
            or not isinstance(position, int) or not 0 <= position < n
            or not isinstance(proof, bytes)):
        return None
    # (root_from_leaves of the one leaf, in the loop that every admission check runs; the
    # proof's length is checked as the loop takes its siblings, not by listing the path's
    # nodes first, 1.5 of the 12 us of a worker's check at a shard of 5,000)
    h = leaf_hash(salt, device_id, keys)
    index, size, pos = position, n, 0
    while size > 1:
        if index ^ 1 < size:
            sibling = proof[pos:pos + HASH_BYTES]
            if len(sibling) != HASH_BYTES:
                return None
            pos += HASH_BYTES
            h = _sha256(_NODE + sibling + h if index & 1 else _NODE + h + sibling).digest()
        index >>= 1
        size = (size + 1) >> 1
    return h if pos == len(proof) else None


class ProofNodes:
    """The tree's nodes that admissions reveal, enough to make any multiproof over their
    positions: a worker holds every advertised device's admission, and each hash of the proof
    for a set of advertised positions is a sibling on one of their paths (it is the sibling
    of a node computed from them). Admissions must have been verified (each sibling then is
    the tree's node, or SHA-256 has a collision)."""

    def __init__(self, n: int) -> None:
        self.n = n
        # level -> its nodes by index (None: not revealed); lists, not one dict keyed by
        # (level, index): a worker fills one for its whole shard, ~2n nodes, and reads ~2 log n
        # a device (at 25,000 a dict's lookups cost the close ~10 us a device more)
        self._levels: list[list[bytes | None]] = []
        size = n
        while size > 1:
            self._levels.append([None] * size)
            size = (size + 1) >> 1

    def add(self, position: int, proof: bytes) -> None:
        """Record the siblings of ``proof``, the admission of the leaf at ``position``."""
        index, at = position, 0
        for level in self._levels:
            if index ^ 1 < len(level):
                level[index ^ 1] = proof[at:at + HASH_BYTES]
                at += HASH_BYTES
            index >>= 1

    def prove(self, positions: Sequence[int]) -> bytes:
        """The proof for ``positions`` (strictly increasing, each an added admission's)."""
        return self.prove_runs(_runs(positions))

    def prove_runs(self, runs: list[list[int]]) -> bytes:
        """The proof for the positions of ``runs`` (maximal runs [first, last] of consecutive
        positions, increasing, each an added admission's)."""
        levels = self._levels
        nodes = [levels[level][index] for level, index in _proof_nodes(self.n, runs)]
        if None in nodes:
            raise SecAggConfigError("a roster's proof needs a node no added admission reveals")
        return b"".join(nodes)  # type: ignore[arg-type]


class IdentityTree:
    """The coordinator's tree over a cohort: ``members[i - 1]`` holds device i's keys, its leaf
    at device i's ring position (module docstring)."""

    def __init__(self, round_id: bytes, graph_seed: bytes, members: Sequence[Member]) -> None:
        n = len(members)
        if n < 1:
            raise SecAggConfigError("the cohort is empty")
        for i, keys in enumerate(members, start=1):
            if not well_formed_keys(keys):
                raise SecAggConfigError(f"device {i} needs three {KEY_BYTES}-byte keys "
                                        "(identity, c_pk, s_pk)")
        self.n = n
        self.salt = cohort_salt(round_id, graph_seed, n)
        self._members = tuple(members)
        self._order, self._positions = ring_positions(graph_seed, n)
        level = [leaf_hash(self.salt, i, members[i - 1]) for i in self._order.tolist()]
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

    def position(self, device_id: int) -> int:
        """The leaf position of ``device_id`` (its ring position)."""
        if not 1 <= device_id <= self.n:
            raise SecAggConfigError(f"device_id must be in [1, {self.n}], got {device_id}")
        return int(self._positions[device_id])

    def prove(self, positions: Sequence[int]) -> bytes:
        """The multiproof for ``positions`` (strictly increasing, in [0, n))."""
        if not _increasing(positions, self.n):
            raise SecAggConfigError(f"positions must increase strictly within [0, {self.n})")
        return b"".join(self._levels[level][index]
                        for level, index in _proof_nodes(self.n, _runs(positions)))

    def proof(self, device_id: int) -> bytes:
        """The inclusion proof of ``device_id`` (its admission)."""
        return self.prove((self.position(device_id),))
