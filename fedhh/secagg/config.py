"""The round config the coordinator signs, device admissions, and the session id.

The coordinator fixes every protocol parameter of a round before any device key exists and signs
it with Ed25519; devices and the aggregator verify the signature against the coordinator's public
key, so the aggregator cannot change n_min, k, t, the modulus or the graph.

``session_id = SHA-256(label || canonical config bytes)`` binds every key derivation, AEAD and
signature of the round to this config (and so to its round_id and graph_seed).

With ``device_auth``, each device holds an :class:`Admission`: the coordinator's signature binding
(session, device id, the device's registered Ed25519 identity key). A device signs its round keys
with that identity key; its neighbours check both signatures, so the server cannot substitute keys.

Deadlines are absolute Unix times in milliseconds, one per stage. The library never reads a clock:
the transport closes each stage at its deadline (``SecAggServer.close_stage``), and anything that
arrives afterwards is rejected as late.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.graph import check_graph_parameters
from fedhh.secagg.primitives import (
    KEY_BYTES,
    LABELS,
    SIGNATURE_BYTES,
    ed25519_verify,
    sha256,
    u32,
)

__all__ = [
    "MAX_COHORT",
    "MAX_DIMENSION",
    "Admission",
    "RoundConfig",
    "SignedConfig",
    "StageDeadlines",
    "issue_admission",
    "session_id_of",
    "sign_config",
    "verify_admission",
    "verify_config",
]

MAX_DIMENSION = 1 << 24
MAX_COHORT = 1 << 24
_VERSION = 1
_HEAD = struct.Struct(">HB")  # version, len(round_id)
_BODY = struct.Struct(">IIBIII32sB5Q")  # n, D, bits, n_min, k, t, graph_seed, flags, deadlines
_FLAG_DEVICE_AUTH = 1
_FLAG_CONSISTENCY = 2


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

    def to_bytes(self) -> bytes:
        """The canonical encoding that is signed and hashed into the session id."""
        flags = (_FLAG_DEVICE_AUTH if self.device_auth else 0) | (
            _FLAG_CONSISTENCY if self.consistency_check else 0)
        return (LABELS["config"] + _HEAD.pack(_VERSION, len(self.round_id)) + self.round_id
                + _BODY.pack(self.num_devices, self.dimension, self.modulus_bits, self.n_min,
                             self.k, self.t, self.graph_seed, flags, *self.deadlines.as_tuple()))

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
            raise SecAggConfigError(f"unsupported RoundConfig version {version}")
        offset += _HEAD.size
        if len(data) != offset + id_len + _BODY.size:
            raise SecAggConfigError("RoundConfig encoding has the wrong length")
        round_id = data[offset:offset + id_len]
        n, dim, bits, n_min, k, t, seed, flags, *deadlines = _BODY.unpack_from(
            data, offset + id_len)
        if flags & ~(_FLAG_DEVICE_AUTH | _FLAG_CONSISTENCY):
            raise SecAggConfigError(f"unknown RoundConfig flags {flags:#x}")
        return cls(round_id, n, dim, bits, n_min, k, t, seed, StageDeadlines(*deadlines),
                   bool(flags & _FLAG_DEVICE_AUTH), bool(flags & _FLAG_CONSISTENCY))


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


@dataclass(frozen=True)
class Admission:
    """The coordinator's statement that ``identity_key`` speaks for ``device_id`` in a session."""

    device_id: int
    identity_key: bytes  # raw Ed25519 public key registered with the coordinator
    signature: bytes  # coordinator's Ed25519 signature over the transcript below


def _admission_transcript(session_id: bytes, device_id: int, identity_key: bytes) -> bytes:
    return LABELS["admission"] + session_id + u32(device_id) + identity_key


def issue_admission(session_id: bytes, device_id: int, identity_key: bytes,
                    coordinator_key: Ed25519PrivateKey) -> Admission:
    """Coordinator side: admit ``device_id`` with its registered identity key to the session."""
    if len(identity_key) != KEY_BYTES:
        raise SecAggConfigError(f"identity_key must be {KEY_BYTES} bytes")
    transcript = _admission_transcript(session_id, device_id, identity_key)
    return Admission(device_id, identity_key, coordinator_key.sign(transcript))


def verify_admission(admission: Admission, session_id: bytes, coordinator_public: bytes) -> bool:
    """True iff ``admission`` is well formed and signed by the coordinator for this session."""
    if (not isinstance(admission, Admission) or not isinstance(admission.device_id, int)
            or not isinstance(admission.identity_key, bytes)
            or len(admission.identity_key) != KEY_BYTES
            or not isinstance(admission.signature, bytes)
            or len(admission.signature) != SIGNATURE_BYTES
            or not 0 <= admission.device_id < 1 << 32):
        return False
    transcript = _admission_transcript(session_id, admission.device_id, admission.identity_key)
    return ed25519_verify(coordinator_public, admission.signature, transcript)
