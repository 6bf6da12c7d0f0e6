"""The round config the coordinator signs, device admissions, and the session id.

The coordinator fixes every protocol parameter of a round and signs it with Ed25519; devices and
the aggregator verify the signature against the coordinator's public key, so the aggregator
cannot change n_min, k, t, the modulus or the graph.

``session_id = SHA-256(label || canonical config bytes)`` binds every key derivation, AEAD and
signature of the round to this config (and so to its round_id and graph_seed).

With ``device_auth``, the config commits to the cohort: ``identity_root`` is the root of the
coordinator's Merkle tree over (device id, registered Ed25519 identity key, round keys c_pk and
s_pk) for ids 1..n (:mod:`fedhh.secagg.merkle`). A device generates its round keys before it
checks in and presents the public halves to the coordinator; its :class:`Admission` is its keys
and its inclusion proof. Neighbours and the aggregator check the proof against the signed root
(a few hashes, no signature), so the server can neither substitute keys nor invent devices. The
graph seed is drawn after check-in, when the keys are already fixed.

Deadlines are absolute Unix times in milliseconds, one per stage. The library never reads a clock:
the transport closes each stage at its deadline (``SecAggServer.close_stage``), and anything that
arrives afterwards is rejected as late.
"""

from __future__ import annotations

import functools
import itertools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.graph import check_graph_parameters, ring_positions
from fedhh.secagg.merkle import (
    HASH_BYTES,
    IdentityTree,
    Member,
    cohort_salt,
    leaf_hash,
    root_from_leaves,
    root_from_proof,
    well_formed_keys,
)
from fedhh.secagg.primitives import (
    LABELS,
    ed25519_verify,
    sha256,
)

__all__ = [
    "MAX_COHORT",
    "MAX_DIMENSION",
    "Admission",
    "IdentityTree",
    "RoundConfig",
    "SignedConfig",
    "StageDeadlines",
    "issue_admission",
    "session_id_of",
    "sign_config",
    "verify_admission",
    "verify_config",
    "verify_members",
]

MAX_DIMENSION = 1 << 24
MAX_COHORT = 1 << 24
# 2: identity_root (a Merkle root) replaced per-device coordinator signatures;
# 3: its leaves also commit to the round keys presented at check-in;
# 4: a device's j-th neighbour (ascending ids) holds its Shamir shares at the point j, not at
#    its id (a device of version 3 would share at points the server no longer reads);
# 5: the identity tree's leaves are in ring order and a roster is one multiproof, not a proof
#    per entry (a party of version 4 would check admissions at the wrong leaves).
_VERSION = 5
_HEAD = struct.Struct(">HB")  # version, len(round_id)
# n, D, bits, n_min, k, t, graph_seed, flags, deadlines, identity_root (zeros without device_auth)
_BODY = struct.Struct(">IIBIII32sB5Q32s")
_FLAG_DEVICE_AUTH = 1
_FLAG_CONSISTENCY = 2
# How far ahead an aggregation service takes a config's last deadline by default (its
# --max-round-seconds): the service's limit, and what the coordinator stretches stage windows
# within (fedhh_coordinator.stretch), which cannot ask a running service for its own.
MAX_ROUND_S = 3600.0


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise SecAggConfigError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")


@dataclass(frozen=True)
class StageDeadlines:
    """Absolute deadlines (Unix ms) of the five stages; non-decreasing."""

    advertise_keys: int
    share_keys: int
    masked_input: int
    consistency_check: int
    unmask: int

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        return (self.advertise_keys, self.share_keys, self.masked_input,
                self.consistency_check, self.unmask)

    def of(self, stage: int) -> int:
        """The deadline (Unix ms) of ``stage``, a ``Stage``, whose value is its place in
        :meth:`as_tuple`; the last stage's for ``Stage.DONE``. The one reading of a stage's
        deadline: the devices' (``fedhh.rpc.participation``) and the aggregator's
        (``fedhh_aggregator.rounds``; before, each kept a table of its own)."""
        return self.as_tuple()[min(int(stage), 4)]

    def at_s(self, stage: int) -> float:
        """:meth:`of` in Unix seconds, as the clocks that wait for it read (``time.time()``):
        the devices' and the aggregator's (before, each side converted it in a function of its
        own)."""
        return self.of(stage) / 1000

    def __post_init__(self) -> None:
        values = self.as_tuple()
        for name, value in zip(("advertise_keys", "share_keys", "masked_input",
                                "consistency_check", "unmask"), values, strict=True):
            _check_int(f"deadline {name}", value, 0, (1 << 63) - 1)
        if any(a > b for a, b in itertools.pairwise(values)):
            raise SecAggConfigError(f"stage deadlines must be non-decreasing, got {values}")


@dataclass(frozen=True)
class RoundConfig:
    """Every parameter of one secure-aggregation round; validated on construction.

    Devices have ids 1..num_devices (their Shamir x coordinate). Sums are taken modulo
    2^modulus_bits, which must exceed num_devices so a sum of 0/1 entries never wraps.
    ``identity_root`` (32 bytes, exactly when ``device_auth``) is the root of the cohort's
    :class:`~fedhh.secagg.merkle.IdentityTree` for this round_id and graph_seed.
    """

    round_id: bytes
    num_devices: int
    dimension: int
    modulus_bits: int
    n_min: int
    k: int
    t: int
    graph_seed: bytes
    deadlines: StageDeadlines
    device_auth: bool = False
    consistency_check: bool = False
    identity_root: bytes | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.round_id, bytes) or not 1 <= len(self.round_id) <= 64:
            raise SecAggConfigError(f"round_id must be 1..64 bytes, got {self.round_id!r}")
        _check_int("num_devices", self.num_devices, 2, MAX_COHORT)
        _check_int("dimension", self.dimension, 1, MAX_DIMENSION)
        if self.modulus_bits not in (16, 32):
            raise SecAggConfigError(f"modulus_bits must be 16 or 32, got {self.modulus_bits!r}")
        if 1 << self.modulus_bits <= self.num_devices:
            raise SecAggConfigError(
                f"modulus 2^{self.modulus_bits} must exceed num_devices={self.num_devices}, "
                "or a sum of 0/1 reports could wrap")
        _check_int("n_min", self.n_min, 1, self.num_devices)
        _check_int("k", self.k, 1, self.num_devices - 1)
        check_graph_parameters(self.num_devices, self.k)
        _check_int("t", self.t, 1, self.k)
        if not isinstance(self.graph_seed, bytes) or len(self.graph_seed) != 32:
            raise SecAggConfigError("graph_seed must be 32 bytes")
        if not isinstance(self.deadlines, StageDeadlines):
            raise SecAggConfigError("deadlines must be a StageDeadlines")
        if not isinstance(self.device_auth, bool) or not isinstance(self.consistency_check, bool):
            raise SecAggConfigError("device_auth and consistency_check must be bools")
        if self.consistency_check and not self.device_auth:
            raise SecAggConfigError("consistency_check needs device_auth (signed survivor sets)")
        if self.device_auth:
            if not isinstance(self.identity_root, bytes) or len(self.identity_root) != HASH_BYTES:
                raise SecAggConfigError(
                    f"device_auth needs identity_root, the {HASH_BYTES}-byte Merkle root of the "
                    "cohort's identity keys")
        elif self.identity_root is not None:
            raise SecAggConfigError("identity_root is only used with device_auth")

    @functools.cached_property
    def identity_salt(self) -> bytes:
        """The per-round salt of the cohort's Merkle leaves (computed once per config)."""
        return cohort_salt(self.round_id, self.graph_seed, self.num_devices)

    def to_bytes(self) -> bytes:
        """The canonical encoding that is signed and hashed into the session id."""
        flags = (_FLAG_DEVICE_AUTH if self.device_auth else 0) | (
            _FLAG_CONSISTENCY if self.consistency_check else 0)
        return (LABELS["config"] + _HEAD.pack(_VERSION, len(self.round_id)) + self.round_id
                + _BODY.pack(self.num_devices, self.dimension, self.modulus_bits, self.n_min,
                             self.k, self.t, self.graph_seed, flags, *self.deadlines.as_tuple(),
                             self.identity_root or bytes(HASH_BYTES)))

    @classmethod
    def from_bytes(cls, data: bytes) -> RoundConfig:
        """Parse :meth:`to_bytes` output exactly; raises :class:`SecAggConfigError`."""
        label = LABELS["config"]
        if not isinstance(data, bytes) or not data.startswith(label):
            raise SecAggConfigError("not a RoundConfig encoding")
        offset = len(label)
        if len(data) < offset + _HEAD.size:
            raise SecAggConfigError("truncated RoundConfig")
        version, id_len = _HEAD.unpack_from(data, offset)
        if version != _VERSION:
            # The remedy, not the number alone: a coordinator and its aggregators or devices of
            # different fedhh versions refused every round with nothing on what to do.
            older = "this process" if version > _VERSION else "the coordinator"
            raise SecAggConfigError(
                f"unsupported RoundConfig version {version} (this process reads version "
                f"{_VERSION}): {older} runs an older fedhh than the other side; run the same "
                "fedhh version on the coordinator, the aggregation services and the devices")
        offset += _HEAD.size
        if len(data) != offset + id_len + _BODY.size:
            raise SecAggConfigError("RoundConfig encoding has the wrong length")
        round_id = data[offset:offset + id_len]
        n, dim, bits, n_min, k, t, seed, flags, *deadlines, root = _BODY.unpack_from(
            data, offset + id_len)
        if flags & ~(_FLAG_DEVICE_AUTH | _FLAG_CONSISTENCY):
            raise SecAggConfigError(f"unknown RoundConfig flags {flags:#x}")
        device_auth = bool(flags & _FLAG_DEVICE_AUTH)
        if not device_auth and root != bytes(HASH_BYTES):
            raise SecAggConfigError("identity_root without device_auth")
        return cls(round_id, n, dim, bits, n_min, k, t, seed, StageDeadlines(*deadlines),
                   device_auth, bool(flags & _FLAG_CONSISTENCY), root if device_auth else None)


def session_id_of(config: RoundConfig) -> bytes:
    """The 32-byte session id of the round."""
    return sha256(LABELS["session"], config.to_bytes())


@dataclass(frozen=True)
class SignedConfig:
    """A round config as sent on the wire: canonical bytes plus the coordinator's signature."""

    payload: bytes
    signature: bytes


def sign_config(config: RoundConfig, coordinator_key: Ed25519PrivateKey) -> SignedConfig:
    """The coordinator's signed config."""
    payload = config.to_bytes()
    return SignedConfig(payload, coordinator_key.sign(payload))


def verify_config(signed: SignedConfig, coordinator_public: bytes) -> RoundConfig:
    """The config, if the signature verifies; raises :class:`SecAggConfigError` otherwise."""
    if not ed25519_verify(coordinator_public, signed.signature, signed.payload):
        raise SecAggConfigError("round config signature does not verify")
    return RoundConfig.from_bytes(signed.payload)


@dataclass(frozen=True, slots=True)
class Admission:
    """Proof that ``identity_key`` and the round keys (``c_pk``, ``s_pk``) are ``device_id``'s in
    a round: ``proof`` is the inclusion proof of that leaf in the tree whose root the config
    commits to. The device presented the round keys at check-in and alone holds their private
    halves."""

    device_id: int
    identity_key: bytes  # raw Ed25519 public key registered with the coordinator
    c_pk: bytes  # X25519 public key of the round: share encryption
    s_pk: bytes  # X25519 public key of the round: pairwise masks
    # sibling hashes, leaf to root (about log2(n) * 32 bytes); empty in a roster entry, whose
    # keys the roster's one proof covers (verify_members)
    proof: bytes

    @property
    def keys(self) -> Member:
        return (self.identity_key, self.c_pk, self.s_pk)


def issue_admission(tree: IdentityTree, device_id: int) -> Admission:
    """Coordinator side: ``device_id``'s admission from the round's identity tree."""
    identity_key, c_pk, s_pk = tree.member(device_id)
    return Admission(device_id, identity_key, c_pk, s_pk, tree.proof(device_id))


def verify_admission(admission: Admission, config: RoundConfig) -> bool:
    """True iff ``admission`` is well formed and its proof leads to the config's identity root."""
    if (not isinstance(admission, Admission) or not config.device_auth
            or config.identity_root is None):
        return False
    n, device_id = config.num_devices, admission.device_id
    if not isinstance(device_id, int) or isinstance(device_id, bool) or not 1 <= device_id <= n:
        return False
    position = int(ring_positions(config.graph_seed, n)[1][device_id])
    root = root_from_proof(config.identity_salt, n, position, device_id, admission.keys,
                           admission.proof)
    return root is not None and root == config.identity_root


def verify_members(members: Sequence[tuple[int, Member]], proof: bytes, config: RoundConfig,
                   *, leaf: Callable[[bytes, int, Member], bytes] = leaf_hash) -> bool:
    """True iff ``proof`` is the multiproof that each (device id, keys) of ``members`` (distinct
    ids in 1..n, 32-byte keys) is the cohort's leaf under the config's identity root: a roster
    (the server's one proof for a device's own and its neighbours' entries). Each leaf's
    position is its id's ring position, derived here from the signed graph seed. ``leaf`` is
    :func:`~fedhh.secagg.merkle.leaf_hash` (a host simulating many devices passes it
    memoised: its devices hash the same neighbours' leaves)."""
    if not config.device_auth or config.identity_root is None or not members:
        return False
    n, salt = config.num_devices, config.identity_salt
    positions = ring_positions(config.graph_seed, n)[1]
    leaves = []
    for member in members:
        if not isinstance(member, tuple) or len(member) != 2:
            return False
        device_id, keys = member
        if (not isinstance(device_id, int) or isinstance(device_id, bool)
                or not 1 <= device_id <= n or not well_formed_keys(keys)):
            return False
        leaves.append((int(positions[device_id]), leaf(salt, device_id, keys)))
    leaves.sort(key=lambda leaf: leaf[0])
    root = root_from_leaves(n, leaves, proof)  # (refuses a position twice: an id twice)
    return root is not None and root == config.identity_root
