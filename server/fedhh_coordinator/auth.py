"""Credentials of the coordinator: the enrollment and admin tokens, device credentials, and the
Ed25519 key that signs tasks and round configurations.

- Enrollment: a device presents the operator's enrollment token and its Ed25519 identity key;
  it receives a device id and a random 32-byte credential, of which only the SHA-256 is stored.
- Device calls carry ``authorization: Bearer <device_id>.<credential hex>``; admin calls carry
  ``authorization: Bearer <admin token>``. Secrets are compared in constant time.
- The signing key lives in a PEM file (created with mode 0600 on first start); its public half is
  written beside it (``<file>.pub``) for the aggregator, and devices pin it at enrollment.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fedhh.errors import AuthenticationError, ConfigError

TASK_CONTEXT = b"fedhh/v1/task"


def load_or_create_signing_key(path: str | Path) -> Ed25519PrivateKey:
    """The coordinator's signing key from ``path`` (created if missing) and ``path.pub``."""
    key_path = Path(path)
    if key_path.exists():
        try:
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        except ValueError as error:
            raise ConfigError(f"{key_path} is not a PEM private key: {error}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(f"{key_path} does not hold an Ed25519 key")
    else:
        key = Ed25519PrivateKey.generate()
        key_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    pub = public_key_path(key_path)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    if not pub.exists() or pub.read_bytes() != pem:
        pub.write_bytes(pem)
    return key


def public_key_path(key_path: str | Path) -> Path:
    return Path(f"{key_path}.pub")


def raw_public(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def credential_hash(credential: bytes) -> bytes:
    return hashlib.sha256(b"fedhh/v1/credential" + credential).digest()


def bearer(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str:
    """The bearer value of the ``authorization`` metadata entry."""
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token:
                return token.strip()
    raise AuthenticationError("missing 'authorization: Bearer ...' metadata")


def check_admin(metadata: tuple[tuple[str, str | bytes], ...] | None, token: bytes) -> None:
    if not hmac.compare_digest(bearer(metadata).encode(), token):
        raise AuthenticationError("invalid admin token")


def parse_device_bearer(metadata: tuple[tuple[str, str | bytes], ...] | None
                        ) -> tuple[int, bytes]:
    token = bearer(metadata)
    device, _, secret = token.partition(".")
    try:
        return int(device), bytes.fromhex(secret)
    except ValueError:
        raise AuthenticationError("malformed device credential") from None


def verify_device(stored_hash: bytes | None, credential: bytes) -> None:
    if stored_hash is None or not hmac.compare_digest(stored_hash, credential_hash(credential)):
        raise AuthenticationError("unknown device or invalid credential")


def new_credential() -> bytes:
    return os.urandom(32)
