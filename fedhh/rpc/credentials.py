"""The services' credentials on disk: shared secrets (tokens) from files or the environment,
and the coordinator's Ed25519 signing key (a PEM file, created with mode 0600 on first start;
its public half is written beside it, ``<file>.pub``, for the aggregator)."""

from __future__ import annotations

import codecs
import hmac
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fedhh.errors import AuthenticationError, ConfigError
from fedhh.input_files import SECRET_FILE_BYTES, read_whole
from fedhh.output_paths import open_new

MIN_SECRET_BYTES = 16
# The services refuse authorization metadata over 512 characters ("Bearer " and the token).
MAX_AUTHORIZATION = 512
MAX_SECRET_BYTES = MAX_AUTHORIZATION - len("Bearer ")
METADATA_TEXT = bytes(range(0x20, 0x7F))  # what a gRPC metadata value (not "-bin") may hold

Metadata = tuple[tuple[str, str | bytes], ...] | None


def bearer_metadata(token: str | bytes) -> tuple[tuple[str, str]]:
    """A call's metadata presenting ``token``: ``authorization: Bearer <token>``."""
    text = token.decode() if isinstance(token, bytes) else token
    return (("authorization", f"Bearer {text}"),)


def bearer(metadata: Metadata) -> str:
    """The bearer value of a call's ``authorization`` metadata entry (the first with the Bearer
    scheme), its length checked before it is looked at; AuthenticationError without one. Every
    port of every service reads a token here (the control, admin and selector tokens and the
    devices' credentials; before, the aggregator had a copy without the length bound)."""
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            if len(text) > MAX_AUTHORIZATION:
                raise AuthenticationError("the authorization metadata is too long")
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token:
                return token.strip()
    raise AuthenticationError("missing 'authorization: Bearer ...' metadata")


def check_bearer(metadata: Metadata, token: bytes, refusal: str) -> None:
    """The call's bearer is ``token``, compared in constant time; else AuthenticationError:
    ``refusal`` for another token, :func:`bearer`'s words for none (or one too long). The one
    comparison of a presented token (before, the coordinator's token checks made their own)."""
    if not hmac.compare_digest(bearer(metadata).encode(), token):
        raise AuthenticationError(refusal)


def presents(metadata: Metadata, token: bytes) -> bool:
    """Whether the call's bearer is ``token`` (:func:`check_bearer`; False without a bearer,
    or with one too long)."""
    try:
        check_bearer(metadata, token, "")
    except AuthenticationError:
        return False
    return True


def permission_remedy(path: str | os.PathLike[str], error: OSError) -> str:
    """For a file this process may not read (a token, key or TLS file), who this process is,
    whose the file is, and the remedy (empty for any other error). Files made without `fedhh
    certs --owner/--group` are mode 0600 for their maker, and a container's service (uid 10001)
    said only "cannot read TLS file /run/secrets/server.key: Permission denied"."""
    if not isinstance(error, PermissionError):
        return ""
    uid, gid = os.geteuid(), os.getegid()
    user = ""
    try:
        import pwd

        user = f" ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):  # no such user in the container's /etc/passwd
        pass
    try:
        info = os.stat(path)
        whose = (f"the file is owned by uid {info.st_uid}, gid {info.st_gid}, mode "
                 f"{stat.S_IMODE(info.st_mode):04o}")
    except OSError as stat_error:
        whose = (f"the file's owner and mode cannot be read either ({stat_error.strerror}: "
                 f"a directory on its path is closed to this process)")
    return (f"; this process runs as uid {uid}{user}, gid {gid}, and {whose}: for files "
            f"`fedhh certs` wrote, run it again with --owner {uid}:{gid} (as root) or "
            f"--group {gid} (group-readable, 0640), or give this process the file with "
            f"chown/chmod")


def read_secret(path: str | Path | None, env: str, what: str = "secret",
                option: str | None = None) -> bytes:
    """A token from a file (stripped) or, without a file, from an environment variable;
    ``what`` names it in errors ("the control token ..."), ``option`` is the flag that gives
    the file (default ``--<what>-file``)."""
    if path:
        try:
            # (a leading UTF-8 byte-order mark is the file's, an editor's, as every other input
            # file's reader takes it: kept, it was "not printable ASCII text (byte 0xef)")
            value = read_whole(path, SECRET_FILE_BYTES, f"the {what} file").removeprefix(
                codecs.BOM_UTF8).strip()
        except OSError as error:
            raise ConfigError(f"cannot read the {what} file {path}: {error.strerror}"
                              f"{permission_remedy(path, error)}") from None
    else:
        value = os.environ.get(env, "").encode()
        if not value:
            option = option or "--" + what.replace(" ", "-") + "-file"
            raise ConfigError(f"no {what} was given: pass {option} PATH or set ${env}")
    source = path or "$" + env
    if len(value) < MIN_SECRET_BYTES:
        raise ConfigError(f"the {what} (from {source}) must be at least {MIN_SECRET_BYTES} "
                          "bytes")
    if len(value) > MAX_SECRET_BYTES:
        raise ConfigError(f"the {what} (from {source}) must be at most {MAX_SECRET_BYTES} bytes "
                          "(it travels in a call's authorization metadata)")
    unsendable = value.translate(None, METADATA_TEXT)
    if unsendable:
        # gRPC fails any call whose metadata holds another byte (INTERNAL "Invalid metadata"):
        # a service that kept such a token could never be presented it.
        raise ConfigError(f"the {what} (from {source}) is not printable ASCII text (it holds "
                          f"byte 0x{unsendable[0]:02x}), and gRPC metadata carries nothing "
                          "else; use a text token, such as the hex digits `fedhh certs` writes")
    return value


def load_public_key(path: str | Path, option: str = "--coordinator-key") -> bytes:
    """A raw Ed25519 public key from a PEM (SubjectPublicKeyInfo) file, such as the
    coordinator's ``<signing key>.pub``; ConfigError, opening with ``option`` (the flag that
    gave the path: every service that takes this key takes it as --coordinator-key), for a
    file that cannot be read or holds anything else."""
    try:
        pem = read_whole(path, SECRET_FILE_BYTES, f"{option}: the public key")
        key = serialization.load_pem_public_key(pem)
    except OSError as error:
        raise ConfigError(f"{option}: cannot read the public key {path}: {error.strerror}"
                          f"{permission_remedy(path, error)}") from None
    except ValueError as error:
        if b"PRIVATE KEY-----" in pem:
            # (the coordinator's signing key given for its .pub: before, "is not a PEM public
            # key: Valid PEM but no BEGIN PUBLIC KEY/END PUBLIC KEY delimiters. ...")
            raise ConfigError(
                f"{option}: {path} holds a private key, where the coordinator's public key is "
                f"wanted: give {public_key_path(path)} (`fedhh certs` writes it beside the "
                "signing key), and keep the private key with the coordinator alone") from None
        raise ConfigError(f"{option}: {path} is not a PEM public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"{option}: {path} does not hold an Ed25519 public key")
    return key.public_bytes_raw()


def load_signing_key(path: str | Path, what: str | None = None) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file ``path``; ConfigError, naming ``what`` (default
    the path), for a file that cannot be read or holds anything else."""
    from cryptography.exceptions import UnsupportedAlgorithm

    what = what or str(path)
    pem = b""
    try:
        pem = read_whole(path, SECRET_FILE_BYTES, "key")
        key = serialization.load_pem_private_key(pem, password=None)
    except OSError as error:
        raise ConfigError(f"cannot read {what}: {error.strerror or error}"
                          f"{permission_remedy(path, error)}") from None
    except (ValueError, TypeError, UnsupportedAlgorithm):  # (TypeError: a password is needed)
        if b"-----BEGIN PUBLIC KEY-----" in pem:
            # (the .pub given for the signing key: before, "is not an unencrypted PEM private
            # key", which did not say which file was wanted)
            private = Path(path).name.removesuffix(".pub") if str(path).endswith(".pub") else ""
            raise ConfigError(f"{what} holds a public key, where the coordinator's private "
                              "signing key is wanted: give "
                              + (f"{private}, the file beside it" if private else "the signing key")
                              + " (its .pub is what the aggregator, combiner and selectors take)"
                              ) from None
        raise ConfigError(f"{what} is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{what} does not hold an Ed25519 key")
    return key


def load_or_create_signing_key(path: str | Path) -> Ed25519PrivateKey:
    """The coordinator's signing key from ``path`` (created if missing, in a folder that must
    exist: a mistyped folder would otherwise hold a new key the devices refuse) and
    ``path.pub``."""
    key_path = Path(path)
    if key_path.exists():
        key = load_signing_key(key_path)
    else:
        key = Ed25519PrivateKey.generate()
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


def write_private(path: str | Path, text: str) -> None:
    """Write a secret file readable by its owner only (created 0600, replaced atomically).
    A write that fails removes its temporary file: before, a disk that filled mid-write, or
    a ``path`` that is a folder, left the secret, whole or in part, in ``.NAME.tmp``."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    fd = open_new(tmp)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
