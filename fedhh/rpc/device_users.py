"""Which of a dataset's users a device process hosts (`fedhh device --users`), and their tokens.

``START:END`` hosts a range, ``i/N`` shard i of N (N near-equal, disjoint ranges), and
``tokens`` the users that the enrollment tokens file names. A tokens file holds either one token
per line, line u for dataset user u (``fedhh admin mint-tokens --count``), or ``USER TOKEN``
lines for the users it names only (``fedhh admin mint-tokens --users``, ``fedhh certs
--device-replicas``): a process given only its own users' tokens cannot enroll anyone else's
devices, which is how each device replica of a deployment gets its own share (issue 28).

A token is presented in an enrollment request that the device signs with its identity key
(:func:`enroll_request`; the coordinator checks it with :func:`enrollment_proof`): a leaked
token and the device's public key are not enough to enroll in its place.
"""

from __future__ import annotations

import codecs
import hashlib
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.input_files import LIST_FILE_BYTES, read_whole
from fedhh.integers import read_integer
from fedhh.v1 import coordinator_pb2 as pb

TOKENS = "tokens"
TOKEN_HEX_DIGITS = 64  # (a minted token: 32 random bytes in hex, fedhh_coordinator.enrollment)


def shard_range(index: int, count: int, num_users: int) -> range:
    """Users of shard ``index`` of ``count``: the shards are disjoint, cover every user, and
    differ in size by at most one (so none is empty)."""
    if count > num_users:
        raise ConfigError(f"{count} shards of {num_users} users: more shards than users")
    return range(index * num_users // count, (index + 1) * num_users // count)


def user_range(text: str, num_users: int) -> range:
    """``START:END`` (END exclusive, either may be empty) or ``i/N``."""
    try:
        if "/" in text:
            index, count = (read_integer(x) for x in text.split("/"))
            if not 0 <= index < count:
                raise ValueError
            return shard_range(index, count, num_users)
        start_text, _, end_text = text.partition(":")
        # (read as every integer option is, fedhh/integers.py: 1e3:2e3 too; before, int())
        start = read_integer(start_text) if start_text else 0
        end = read_integer(end_text) if end_text else num_users
    except ValueError:  # (ConfigError too)
        raise ConfigError(f"--users must be START:END, i/N (shard i of N, 0 <= i < N) or "
                          f"tokens, got {text!r}") from None
    if not 0 <= start <= end <= num_users:
        # (before: "outside the dataset's 0..600", which read as if user 600 were in it)
        raise ConfigError(f"--users {text!r} is outside the dataset's {num_users} users: "
                          f"START:END names users START..END-1, within 0:{num_users}")
    return range(start, end)


def _tokens_file_error(path: str | Path, error: OSError | UnicodeDecodeError) -> ConfigError:
    """Why a tokens file cannot be read. A file that is not ASCII is no tokens file (a dataset
    given in its place, say): said so, where Python's words were "'ascii' codec can't decode
    byte 0xf0 in position 0: ordinal not in range(128)". Its place is counted from 1, the line
    and the byte in it, as every input file's (before, "byte 0", from the file's start)."""
    if isinstance(error, UnicodeDecodeError):
        data, start = error.object, error.start
        line = data.count(b"\n", 0, start) + 1
        byte = start - data.rfind(b"\n", 0, start)
        return ConfigError(
            f"cannot read the enrollment tokens file {path}: line {line}: byte {byte} of the "
            f"line is not ASCII (0x{data[start]:02x}), so this is not a tokens file (tokens "
            "are hex digits, one a line or after a user number, as `fedhh certs` and `fedhh "
            "admin mint-tokens` write them): is it another file, a dataset?")
    return ConfigError(f"cannot read the enrollment tokens file {path}: "
                       f"{getattr(error, 'strerror', None) or error}")


def tokens_file_text(path: str | Path) -> str:
    """The text of a tokens file, the device's and the coordinator's alike: ASCII, after a
    leading UTF-8 byte-order mark, which is the file's (an editor's), as every other input
    file's reader takes it; before, such a file was "line 1: byte 1 of the line is not ASCII
    (0xef), so this is not a tokens file". A byte not ASCII is placed past the mark, as
    `fedhh.input_files.not_utf8` places one."""
    try:
        return read_whole(path, LIST_FILE_BYTES, "enrollment tokens file").removeprefix(
            codecs.BOM_UTF8).decode("ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise _tokens_file_error(path, error) from None


def read_tokens(path: str | Path) -> dict[int, str]:
    """Every token of a tokens file (module docstring), by dataset user; blank lines name no
    user in a keyed file and stand for a user without a token in a positional one."""
    lines = tokens_file_text(path).splitlines()
    fields = [line.split() for line in lines]
    wide = next((i for i, f in enumerate(fields) if len(f) > 2), None)
    if wide is not None:
        # (before: "expected one token per line ... or USER TOKEN on every line, not both",
        # for a file with a column too many on every line)
        raise ConfigError(f"{path}:{wide + 1}: {len(fields[wide])} fields; expected one token "
                          "per line (line u for user u) or USER TOKEN on every line")
    keyed = {len(f) for f in fields if f} == {2}
    if not keyed:
        bad = next((i for i, f in enumerate(fields) if len(f) > 1), None)
        if bad is not None:
            raise ConfigError(f"{path}:{bad + 1}: expected one token per line (line u for user "
                              "u) or USER TOKEN on every line, not both")
        for number, f in enumerate(fields, start=1):
            if f:
                _check_token(path, number, f[0])
        return {u: f[0] for u, f in enumerate(fields) if f}
    tokens: dict[int, str] = {}
    for number, f in enumerate(fields, start=1):
        if not f:
            continue
        if not f[0].isdigit():
            raise ConfigError(f"{path}:{number}: expected USER TOKEN with USER a dataset user "
                              f"number, got {f[0][:20]!r}")
        user = int(f[0])
        if user in tokens:
            raise ConfigError(f"{path}:{number}: a second token for user {user}")
        _check_token(path, number, f[1])
        tokens[user] = f[1]
    return tokens


def _check_token(path: str | Path, number: int, token: str) -> None:
    """ConfigError for a token that no coordinator minted (``USER,TOKEN`` with a comma, a
    cut line): before, the process started and every device was refused at enrolment."""
    if len(token) != TOKEN_HEX_DIGITS or any(c not in "0123456789abcdefABCDEF" for c in token):
        shown = token if len(token) <= 24 else token[:20] + "..."
        raise ConfigError(
            f"{path}:{number}: {shown!r} ({len(token)} characters) is no enrollment token: "
            f"a token is {TOKEN_HEX_DIGITS} hex digits, one a line or after a user number and "
            "a space, as `fedhh certs` and `fedhh admin mint-tokens` write them")


def tokens_for(path: str | None, users: list[int]) -> dict[int, str]:
    """The enrollment token of each of ``users`` from the file at ``path`` (none without one)."""
    if not path:
        return {}
    tokens = read_tokens(path)
    missing = [u for u in users if u not in tokens]
    if missing:
        raise ConfigError(f"{path} has no token for users {missing[:5]} (a device process "
                          "needs the token of every user it hosts)")
    return {u: tokens[u] for u in users}


# What an enrollment request's signature covers (proto EnrollRequest.enrollment_signature; the
# web device's identity.ts builds the same bytes). The domain keeps the signature from being
# taken for any other message the identity key signs; every other part has a fixed length.
ENROLLMENT_PROOF_DOMAIN = b"fedhh/v1/enrollment-proof\x00"


def enrollment_proof(token: bytes, identity_public_key: bytes, label: str,
                     attestation: bytes) -> bytes:
    """The message a device signs with its identity key to enroll: it binds the token (so the
    signature is good only where that token was minted), the key, the label and the
    attestation."""
    return (ENROLLMENT_PROOF_DOMAIN + hashlib.sha256(token).digest() + identity_public_key
            + hashlib.sha256(label.encode()).digest() + hashlib.sha256(attestation).digest())


def enroll_request(key: Ed25519PrivateKey, token: bytes, label: str = "",
                   attestation: bytes = b"") -> pb.EnrollRequest:
    """An EnrollRequest for ``key``'s device, signed with ``key``. The same key and token give
    the same request (Ed25519 signs deterministically), so a retry is the request sent again."""
    public = key.public_key().public_bytes(serialization.Encoding.Raw,
                                           serialization.PublicFormat.Raw)
    return pb.EnrollRequest(
        enrollment_token=token, identity_public_key=public, label=label,
        attestation=attestation,
        enrollment_signature=key.sign(enrollment_proof(token, public, label, attestation)))
