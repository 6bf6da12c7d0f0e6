"""Primitives: key agreement, share encryption, deterministic test randomness, purity."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

import fedhh.secagg
from fedhh.secagg.primitives import (
    DeterministicRandom,
    aead_decrypt,
    aead_encrypt,
    agree,
    ed25519_from_seed,
    ed25519_public_bytes,
    ed25519_verify,
    hkdf,
    is_valid_ed25519_public,
    is_valid_x25519_public,
    u32,
    x25519_from_seed,
    x25519_public_bytes,
)

# Low-order points of Curve25519 (encodings of the small-subgroup points).
LOW_ORDER = [
    bytes(32),
    (1).to_bytes(32, "little"),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
    bytes.fromhex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
]


def test_agreement_is_symmetric_and_rejects_low_order_points() -> None:
    rand = DeterministicRandom(1)
    a, b = x25519_from_seed(rand(32)), x25519_from_seed(rand(32))
    assert agree(a, x25519_public_bytes(b)) == agree(b, x25519_public_bytes(a))
    assert is_valid_x25519_public(x25519_public_bytes(a))
    for point in LOW_ORDER:
        assert not is_valid_x25519_public(point)
        with pytest.raises(ValueError):
            agree(a, point)
    assert not is_valid_x25519_public(b"\x09" * 31)


def _pyca_rejects(public: bytes) -> bool:
    """pyca's own verdict: X25519 with a fixed scalar yields all zeros (ValueError)."""
    probe = X25519PrivateKey.from_private_bytes(bytes(range(32)))
    try:
        probe.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:
        return True
    return False


def _encodings(u: int) -> list[bytes]:
    """Every 32-byte encoding X25519 decodes to the residue u (mod p): u and u + p where it
    fits in 255 bits, each with the masked top bit clear and set."""
    p = 2**255 - 19
    values = [v for v in (u, u + p) if v < 2**255]
    return [(v | top).to_bytes(32, "little") for v in values for top in (0, 1 << 255)]


def test_the_low_order_lookup_agrees_with_pycas_rejection() -> None:
    """The five residues are exactly the ones pyca rejects, in every encoding; random keys and
    their neighbours in the integers are accepted by both."""
    p = 2**255 - 19
    order_8 = [int.from_bytes(point, "little") for point in LOW_ORDER[2:4]]
    low = [0, 1, p - 1, *order_8]
    for u in low:
        for encoding in _encodings(u):
            assert _pyca_rejects(encoding), encoding.hex()
            assert not is_valid_x25519_public(encoding), encoding.hex()
    rand = DeterministicRandom(7)
    near = [u + d for u in low for d in (-2, -1, 1, 2) if 0 <= u + d < p and u + d not in low]
    candidates = [encoding for u in near for encoding in _encodings(u)]
    candidates += [rand(32) for _ in range(300)]
    candidates += [x25519_public_bytes(x25519_from_seed(rand(32))) for _ in range(100)]
    for encoding in candidates:
        assert _pyca_rejects(encoding) is (not is_valid_x25519_public(encoding)), encoding.hex()


def test_hkdf_is_rfc_5869() -> None:
    # RFC 5869, appendix A.1 (test case 1, SHA-256), and the same derivation repeated: the
    # module's one hash object must not carry state from one call to the next.
    okm = bytes.fromhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                        "34007208d5b887185865")
    for _ in range(2):
        assert hkdf(b"\x0b" * 22, salt=bytes(range(13)), info=bytes(range(0xf0, 0xfa)),
                    length=42) == okm


def test_share_encryption_binds_direction_and_session() -> None:
    rand = DeterministicRandom(2)
    key = hkdf(b"secret", salt=b"s" * 32, info=b"enc" + u32(1) + u32(2))
    aad = b"s" * 32 + u32(1) + u32(2)
    blob = aead_encrypt(key, b"payload", aad, rand)
    assert aead_decrypt(key, blob, aad) == b"payload"
    swapped = b"s" * 32 + u32(2) + u32(1)
    assert aead_decrypt(key, blob, swapped) is None  # swapped src/dst fails the AAD
    assert aead_decrypt(key, blob, b"t" * 32 + u32(1) + u32(2)) is None  # other session
    flipped = blob[:-1] + bytes([blob[-1] ^ 1])
    assert aead_decrypt(key, flipped, aad) is None
    assert aead_decrypt(key, blob[:20], aad) is None
    other = hkdf(b"secret", salt=b"s" * 32, info=b"enc" + u32(2) + u32(1))
    assert other != key and aead_decrypt(other, blob, aad) is None  # one key per direction


def test_signatures() -> None:
    key = ed25519_from_seed(bytes(range(32)))
    pub = ed25519_public_bytes(key)
    sig = key.sign(b"message")
    assert ed25519_verify(pub, sig, b"message")
    assert not ed25519_verify(pub, sig, b"messagE")
    assert not ed25519_verify(pub, sig[:-1], b"message")
    assert not ed25519_verify(pub[:-1], sig, b"message")


# Ed25519's identity point, (0, 1), as a public key; and R = identity, S = 0: the equation
# [S]B = R + [h]A holds for every message, so a verifier that admits small-order keys accepts
# this as the signature of anything (OpenSSL does).
IDENTITY_POINT = (1).to_bytes(32, "little")
UNIVERSAL_FORGERY = IDENTITY_POINT + bytes(32)


def test_no_signature_verifies_under_a_small_order_key() -> None:
    for message in (b"", b"message", b"any transcript at all"):
        assert not ed25519_verify(IDENTITY_POINT, UNIVERSAL_FORGERY, message)


def _with_order_two_part(public: bytes) -> bytes:
    """``public`` + (0, -1), the point of order 2: (x, y) + (0, -1) = (-x, -y) on Ed25519 (a
    = -1), so the encoding takes p - y and x's other sign bit."""
    p = 2**255 - 19
    y = int.from_bytes(public, "little") & ((1 << 255) - 1)
    sign = public[31] >> 7
    return ((p - y) % p | (sign ^ 1) << 255).to_bytes(32, "little")


def test_only_prime_order_subgroup_keys_are_valid() -> None:
    for seed in range(5):
        honest = ed25519_public_bytes(ed25519_from_seed(bytes([seed]) * 32))
        assert is_valid_ed25519_public(honest)
        # The same key with a torsion part: on the curve, not in the prime-order subgroup.
        assert not is_valid_ed25519_public(_with_order_two_part(honest))
    off_curve = (2).to_bytes(32, "little")  # y = 2: (y^2 - 1)/(d y^2 + 1) has no square root
    for bad in (IDENTITY_POINT, _with_order_two_part(IDENTITY_POINT), off_curve,
                b"short", bytes(33)):
        assert not is_valid_ed25519_public(bad)


def test_deterministic_random_is_reproducible_and_separated() -> None:
    assert DeterministicRandom(7)(40) == DeterministicRandom(7)(40)
    assert DeterministicRandom(7)(40) != DeterministicRandom(8)(40)
    parent = DeterministicRandom(7)
    child = parent.spawn(3)(16)
    parent(1000)  # consuming the parent does not change its children
    assert parent.spawn(3)(16) == child
    assert parent.spawn(4)(16) != child


def test_library_imports_no_network_stack_or_event_loop() -> None:
    code = ("import sys, fedhh.secagg, fedhh.secagg.simulate;"
            "print([m for m in sys.modules if m.split('.')[0] in ('grpc', 'asyncio')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_library_never_uses_non_cryptographic_randomness() -> None:
    """No `random` module, no numpy global random state (a Generator may be passed in), and no
    assert-based validation in the library."""
    package = Path(fedhh.secagg.__file__).parent
    forbidden = re.compile(r"^\s*(import random|from random )|(np|numpy)\.random\.(?!Generator)"
                           r"|^\s+assert ", re.MULTILINE)
    for source in package.glob("*.py"):
        match = forbidden.search(source.read_text())
        assert match is None, f"{source.name}: {match.group(0) if match else ''!r}"
