"""Cryptographic building blocks of the protocol, all from PyCA's libraries.

Nothing here is hand-rolled: X25519 (key agreement), Ed25519 signing, HKDF-SHA256 (key
derivation), AES-256-GCM (share encryption) and SHA-256 (session ids, commitments) are pyca
``cryptography``'s; Ed25519 verification is libsodium's, through PyCA's PyNaCl. libsodium
verifies in half the time of the OpenSSL build ``cryptography`` ships (55 against 112 us on a
2.1 GHz Xeon; a worker verifies two signatures per device, the coordinator one), and it is the
stricter of the two: it refuses public keys and R points of small order, where OpenSSL accepts
R = identity, S = 0 as the signature of *any* message under the identity point as a public key
(both refuse a non-canonical S). The low-order check of an X25519 public key is a lookup of its
u-coordinate among five residues, checked against pyca's own rejection in the tests.

Every key derivation is domain separated: salt = the round's session id, info = a label from
:data:`LABELS` followed by the big-endian 32-bit ids it concerns. So a key of one round, purpose or
direction is never the key of another.

Randomness is passed in as a :data:`RandomSource` (``n -> n random bytes``). Production code uses
:func:`os.urandom`; tests and simulations may pass :class:`DeterministicRandom`.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable

import nacl.bindings
import nacl.exceptions
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "KEY_BYTES",
    "LABELS",
    "NONCE_BYTES",
    "SIGNATURE_BYTES",
    "DeterministicRandom",
    "RandomSource",
    "aead_decrypt",
    "aead_encrypt",
    "agree",
    "ed25519_from_seed",
    "ed25519_public_bytes",
    "ed25519_verify",
    "hkdf",
    "is_valid_ed25519_public",
    "is_valid_x25519_public",
    "sha256",
    "system_random",
    "u32",
    "x25519_from_seed",
    "x25519_public_bytes",
]

RandomSource = Callable[[int], bytes]
"""A source of uniformly random bytes: ``rand(n)`` returns ``n`` bytes."""

system_random: RandomSource = os.urandom
"""The production randomness source (the OS CSPRNG)."""

KEY_BYTES = 32  # X25519 and Ed25519 public keys, HKDF outputs for AES-256, secrets b_u
SIGNATURE_BYTES = 64  # Ed25519
NONCE_BYTES = 12  # AES-GCM

LABELS = {
    "session": b"fedhh/secagg/v1/session",
    "graph": b"fedhh/secagg/v1/graph",
    "enc": b"fedhh/secagg/v2/enc",  # v2: one 64-byte output, lower-to-higher id key first
    "self": b"fedhh/secagg/v1/self-mask",
    "pair": b"fedhh/secagg/v1/pair-mask",
    "commit": b"fedhh/secagg/v1/commit-b",
    "consistency": b"fedhh/secagg/v1/consistency",
    "config": b"fedhh/secagg/v1/round-config",
    # The cohort commitment (fedhh.secagg.merkle); leaf and node labels have equal length.
    "merkle-salt": b"fedhh/secagg/v2/merkle-salt",
    "merkle-leaf": b"fedhh/secagg/v2/merkle-leaf",
    "merkle-node": b"fedhh/secagg/v2/merkle-node",
}

# The u-coordinates (mod p) of the X25519 inputs of small order, on the curve and on its twist:
# E(F_p) = Z/8 x Z/l and its twist = Z/4 x Z/l' (Bernstein, "Curve25519: new Diffie-Hellman speed
# records", PKC 2006, section 3), so the points of order dividing 8 or 4 have u in {0, 1, p - 1}
# or one of the two order-8 values below; libsodium's `has_small_order` rejects the same five
# residues. X25519 maps exactly these to the all-zero output (its scalars are multiples of 8),
# which pyca reports as ValueError: tests/unit/secagg/test_secagg_primitives.py checks pyca's
# verdict against this set.
_P25519 = 2**255 - 19
_LOW_ORDER_U = frozenset((
    0, 1, _P25519 - 1,
    0x00b8495f16056286fdb1329ceb8d09da6ac49ff1fae35616aeb8413b7c7aebe0,
    0x57119fd0dd4e22d8868e1c58c45c44045bef839c55b1d0b1248c50a3bc959c5f,
))


def u32(value: int) -> bytes:
    """Big-endian unsigned 32-bit encoding (ids and counts in every label and transcript)."""
    return struct.pack(">I", value)


def sha256(*parts: bytes) -> bytes:
    """SHA-256 over the concatenation of ``parts`` (callers use fixed-length fields only)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.digest()


# The hash of every HKDF: an immutable description of the algorithm, made once (made per call it
# was a quarter of the ~7 us of a derivation, ~180 of which a device makes per round).
_SHA256 = hashes.SHA256()


def hkdf(ikm: bytes, *, salt: bytes, info: bytes, length: int = KEY_BYTES) -> bytes:
    """HKDF-SHA256 (RFC 5869) of ``ikm``."""
    return HKDF(_SHA256, length, salt, info).derive(ikm)


def x25519_from_seed(seed: bytes) -> X25519PrivateKey:
    """An X25519 private key from 32 uniformly random bytes (pyca clamps them)."""
    if len(seed) != KEY_BYTES:
        raise ValueError(f"an X25519 key needs {KEY_BYTES} random bytes, got {len(seed)}")
    return X25519PrivateKey.from_private_bytes(seed)


def x25519_public_bytes(key: X25519PrivateKey) -> bytes:
    """The 32-byte raw public key of ``key``."""
    return key.public_key().public_bytes_raw()


def is_valid_x25519_public(public: bytes) -> bool:
    """True iff ``public`` is 32 bytes and not a low-order point (which would zero every secret).

    The key's u-coordinate is decoded as RFC 7748 section 5 decodes it (little-endian, the top
    bit masked) and reduced mod p, then looked up among the five small-order residues: a
    comparison of integers, where probing with a fixed scalar (pyca's exchange, ~40 us) cost a
    check-in two scalar multiplications."""
    if not isinstance(public, bytes) or len(public) != KEY_BYTES:
        return False
    u = (int.from_bytes(public, "little") & ((1 << 255) - 1)) % _P25519
    return u not in _LOW_ORDER_U


def agree(private: X25519PrivateKey, peer_public: bytes,
          parse: Callable[[bytes], X25519PublicKey] = X25519PublicKey.from_public_bytes
          ) -> bytes:
    """X25519 shared secret; raises ValueError for a malformed or low-order peer key.

    ``parse`` makes the peer's key object from its 32 bytes (a pure function: a process that
    simulates a cohort passes a memoised one, since each key meets k neighbours there and
    building its object anew cost a tenth of the agreement)."""
    return private.exchange(parse(peer_public))


def ed25519_from_seed(seed: bytes) -> Ed25519PrivateKey:
    """An Ed25519 signing key from 32 uniformly random bytes."""
    if len(seed) != KEY_BYTES:
        raise ValueError(f"an Ed25519 key needs {KEY_BYTES} random bytes, got {len(seed)}")
    return Ed25519PrivateKey.from_private_bytes(seed)


def ed25519_public_bytes(key: Ed25519PrivateKey) -> bytes:
    """The 32-byte raw verification key of ``key``."""
    return key.public_key().public_bytes_raw()


def ed25519_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """True iff ``signature`` is a valid Ed25519 signature (RFC 8032) of ``message`` under
    ``public``, by libsodium's strict rules (see the module's docstring)."""
    if (
        not isinstance(public, bytes)
        or not isinstance(signature, bytes)
        or len(public) != KEY_BYTES
        or len(signature) != SIGNATURE_BYTES
    ):
        return False
    try:
        nacl.bindings.crypto_sign_open(signature + message, public)
    except nacl.exceptions.BadSignatureError:
        return False
    return True


def is_valid_ed25519_public(public: bytes) -> bool:
    """True iff ``public`` is 32 bytes encoding a point of Ed25519's prime-order subgroup, as
    every honestly made key is. libsodium's conversion to X25519 refuses exactly the others
    (small order, not on the curve, or with a small-order component) before converting."""
    if not isinstance(public, bytes) or len(public) != KEY_BYTES:
        return False
    try:
        nacl.bindings.crypto_sign_ed25519_pk_to_curve25519(public)
    except nacl.exceptions.RuntimeError:
        return False
    return True


def aead_encrypt(key: bytes, plaintext: bytes, aad: bytes, rand: RandomSource) -> bytes:
    """AES-256-GCM: returns ``nonce (12 bytes) || ciphertext || tag (16 bytes)``."""
    nonce = rand(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def aead_decrypt(key: bytes, blob: bytes, aad: bytes) -> bytes | None:
    """Inverse of :func:`aead_encrypt`; ``None`` if the blob is short or fails authentication."""
    if not isinstance(blob, bytes) or len(blob) < NONCE_BYTES + 16:
        return None
    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except InvalidTag:
        return None


class DeterministicRandom:
    """A seeded byte stream (AES-256-CTR keystream) for tests and simulations only.

    Deployed devices and servers must use :data:`system_random`; a seed known to anyone else
    would reveal every key and mask derived from it.
    """

    def __init__(self, seed: bytes | int) -> None:
        raw = seed if isinstance(seed, bytes) else str(seed).encode()
        key = hashlib.sha256(b"fedhh/secagg/test-rng" + raw).digest()
        self._key = key
        self._stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()

    def __call__(self, n: int) -> bytes:
        return self._stream.update(bytes(n))

    def spawn(self, label: bytes | int) -> DeterministicRandom:
        """An independent child stream named by ``label`` (e.g. a device id).

        Depends only on the seed and the label, not on how much of this stream was consumed.
        """
        tag = label if isinstance(label, bytes) else u32(label)
        return DeterministicRandom(self._key + tag)
