"""Credentials of the coordinator: the enrollment and admin tokens, device credentials, and the
Ed25519 key that signs tasks and round configurations.

- Enrollment: a device presents the operator's enrollment token and its Ed25519 identity key;
  it receives a device id and a random 32-byte credential, of which only the SHA-256 is stored.
- Device calls carry ``authorization: Bearer <device_id>.<credential hex>``; admin calls carry
  ``authorization: Bearer <admin token>``. Secrets are compared in constant time.
- The signing key lives in a PEM file (``fedhh.rpc.credentials.load_or_create_signing_key``);
  devices pin its public half at enrollment.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from fedhh.errors import AuthenticationError
from fedhh.rpc.credentials import Metadata, bearer, check_bearer


def credential_hash(credential: bytes) -> bytes:
    return hashlib.sha256(b"fedhh/v1/credential" + credential).digest()


def check_admin(metadata: Metadata, token: bytes) -> None:
    check_bearer(metadata, token, "invalid admin token")


MAX_DEVICE_ID = (1 << 63) - 1  # SQLite's INTEGER PRIMARY KEY


def parse_device_bearer(metadata: Metadata) -> tuple[int, bytes]:
    """(device id, credential) of ``<device id>.<64 hex digits>``, checked for shape before
    anything is parsed, so no caller-chosen length or number reaches the store."""
    token = bearer(metadata)
    device, _, secret = token.partition(".")
    if not (device.isascii() and device.isdigit() and 1 <= len(device) <= 19
            and len(secret) == 64):
        raise AuthenticationError("malformed device credential")
    try:
        device_id, credential = int(device), bytes.fromhex(secret)
    except ValueError:
        raise AuthenticationError("malformed device credential") from None
    if not 1 <= device_id <= MAX_DEVICE_ID:
        raise AuthenticationError("malformed device credential")
    return device_id, credential


def verify_device(stored_hash: bytes | None, credential: bytes) -> None:
    if stored_hash is None or not hmac.compare_digest(stored_hash, credential_hash(credential)):
        raise AuthenticationError("unknown device or invalid credential")


def new_credential() -> bytes:
    return os.urandom(32)
