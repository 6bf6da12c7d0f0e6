"""`fedhh certs`: development TLS material and service secrets for a local, compose or
Kubernetes deployment.

Writes one server certificate (server.pem, server.key) valid for the given host names for
--days days (default 30: rerun to renew, then restart the services, which read it as they
start), signed by the development CA in --out (ca.pem, ca.key): the one already there, so
that a renewal leaves every device's and operator's ca.pem valid, else a new one, valid 10
years (--new-ca makes a new one anyway: every client then needs the new ca.pem). With
--secrets DIR (alias --tokens) it also writes the service secrets: control.token (the
coordinator's and the aggregation workers'), admin.token, selector.token (the coordinator's and
its selectors', apart from the control token), the coordinator's Ed25519 signing key
(coordinator-signing.pem, and coordinator-signing.pem.pub for the aggregator) and
device-tokens.txt, --device-tokens
one-time enrollment tokens (line u enrolls dataset user u's device, once; the coordinator
imports the file at start, `--enrollment-tokens-file`). The device replicas never see that
file: device-tokens-i-of-N.txt (N = --device-replicas) holds only the `USER TOKEN` lines of the
users u with u mod N = i, for replica i (`fedhh device --users tokens`), so a replica can enroll
its own devices and no one else's. Existing secrets are kept (a tokens file is only extended,
the replicas' files are rewritten from it): devices pin the signing key at enrolment, and
operators hold the admin token. Every input is checked before anything is written: an existing
secret the services would refuse (a token under 16 bytes, a key that does not load, a tokens
file not in the format above) is an error naming the file, and --out and --secrets stay as
they were.

--secrets is best a folder apart from --out: the same folder (or one inside the other) is
written with a warning that the secrets then lie beside the TLS files, whose ca.pem is handed
to every device and operator; with --kubernetes, as the Kubernetes overlays use it, without one
(kubectl's secretGenerator picks each Secret's files one by one).

Every file a service reads (server.key and the secrets) is written mode 0600 for the caller.
Containers run as uid 10001, gid 10001 (deploy/Dockerfile), so for docker compose either
  --owner 10001:10001   give those files to the image's user (needs root), or
  --group 10001         make them group-readable (0640) by gid 10001 (a group you belong to).
For Kubernetes, --kubernetes: kubectl reads the files as you, so they stay yours, mode 0600.
ca.key never leaves the caller. For production use your own PKI and secret store.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import re
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedhh.cli import options
from fedhh.config import MAX_DEVICES
from fedhh.errors import ConfigError
from fedhh.input_files import LIST_FILE_BYTES, read_whole
from fedhh.output_paths import LAST_FOLDER_MADE, check_parent_folder

DEFAULT_HOSTS = "localhost,127.0.0.1,coordinator,selector,aggregator"
# selector.token apart from control.token: the aggregation workers hold the control token, and
# a selector's stream can fill cohorts with any enrolled device (docs/threat-model.md).
TOKENS = ("control", "admin", "selector")
DEVICE_TOKENS = "device-tokens.txt"
DEVICE_REPLICAS = 4  # deploy/docker-compose.yml's devices-0 .. devices-3
DEVICE_TOKENS_DEFAULT = 2000
SIGNING_KEY = "coordinator-signing.pem"
TLS_FILES = ("ca.pem", "ca.key", "server.pem", "server.key")
# A line of device-tokens.txt as certs writes it: 32 random bytes in hex.
DEVICE_TOKEN = re.compile(rb"[0-9a-fA-F]{64}")
# A DNS label: letters, digits and hyphens, not at either end (RFC 1123), and underscores,
# which Docker and compose allow in the service names containers reach each other by.


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("certs", help="make development TLS certificates and secrets",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True,
                   help="directory for the CA and server certificate (made if missing, as the "
                        "last folder of the path only: its parent must exist)")
    p.add_argument("--hosts", default=DEFAULT_HOSTS,
                   help=f"comma-separated names and addresses the server certificate is valid "
                        f"for (default {DEFAULT_HOSTS}); add the public names devices use")
    p.add_argument("--days", type=_at_most(MAX_DAYS, "days (100 years)"), default=30,
                   help="validity of the server certificate in days (default 30)")
    p.add_argument("--new-ca", action="store_true",
                   help="make a new CA even if --out holds one (every device and operator then "
                        "needs the new ca.pem)")
    p.add_argument("--secrets", "--tokens", dest="secrets", metavar="DIR",
                   help="also write the service tokens and the coordinator signing key here "
                        "(made as --out is)")
    p.add_argument("--device-tokens", type=_at_most(MAX_DEVICES, "tokens (fedhh's most devices)"),
                   default=None, metavar="N",
                   help="one-time enrollment tokens to write with --secrets, for dataset users "
                        f"0..N-1 (default {DEVICE_TOKENS_DEFAULT})")
    p.add_argument("--device-replicas", type=options.positive_int, default=None,
                   metavar="N",
                   help="with --secrets, also split the device tokens into N files, one per "
                        f"device replica (default {DEVICE_REPLICAS}, the compose stack's)")
    access = p.add_mutually_exclusive_group()
    access.add_argument("--owner", type=owner_spec, metavar="UID[:GID]",
                        help="chown server.key and the secrets to this user (needs root)")
    access.add_argument("--group", type=_id, metavar="GID",
                        help="chgrp server.key and the secrets to GID, mode 0640")
    access.add_argument("--kubernetes", action="store_true",
                        help="the files are for Kubernetes Secrets, which kubectl reads as you "
                             "and picks one by one: no note on the compose containers' uid and "
                             "no warning on --secrets sharing the --out folder")
    p.set_defaults(handler=run)


@dataclass(frozen=True)
class Access:
    """Who may read the files services read: the caller only, or also ``uid``/``gid``."""

    uid: int = -1
    gid: int = -1
    mode: int = 0o600

    def apply(self, path: Path) -> None:
        try:
            if self.uid != -1 or self.gid != -1:
                os.chown(path, self.uid, self.gid)
            os.chmod(path, self.mode)
        except PermissionError:
            who = f"{self.uid}:{self.gid}" if self.uid != -1 else f"group {self.gid}"
            raise ConfigError(
                f"cannot give {path} to {who}: permission denied (--owner needs root; "
                f"--group needs a group you belong to)") from None


def check_access(access: Access) -> None:
    """Refuse, before anything is written, an --owner or --group this process cannot give
    files to: chown to another user needs root, and chgrp a group the caller belongs to (the
    kernel's rule, without CAP_CHOWN). Before, the CA and the server certificate and key were
    written first, and the chown of server.key then failed ("cannot give tls/server.key to
    10001:10001: permission denied"), leaving them there and no secrets."""
    euid = os.geteuid()
    if euid == 0 or access == Access():
        return
    if access.uid not in (-1, euid):
        raise ConfigError(
            f"--owner {access.uid}{'' if access.gid == -1 else f':{access.gid}'} needs root "
            f"(this is uid {euid}): run `fedhh certs` as root, or give --group "
            f"{CONTAINER_UID} as a member of that group (docs/networked.md); nothing was "
            "written")
    groups = {os.getegid(), *os.getgroups()}
    if access.gid not in (-1, *groups):
        option = "--group" if access.uid == -1 else "--owner"
        raise ConfigError(
            f"{option}: this user (uid {euid}) is not in group {access.gid} (its groups: "
            f"{', '.join(map(str, sorted(groups)))}): as root, `groupadd -g {access.gid} fedhh "
            f"&& usermod -aG fedhh $USER` and log in again, or run `fedhh certs` as root with "
            f"--owner {CONTAINER_UID}:{CONTAINER_UID}; nothing was written")


# Certificates and the public key: readable by every container user, whatever the umask.
PUBLIC = Access(mode=0o644)
# The user the image's services run as (deploy/Dockerfile).
CONTAINER_UID = 10001


MAX_DAYS = 36_500
MAX_ID = (1 << 32) - 2  # uid_t and gid_t; 2^32 - 1 is -1, "no change"


def _at_most(high: int, what: str) -> Callable[[str], int]:
    return options.integer_in(1, high, what)


def _id(text: str) -> int:
    value = options.non_negative_int(text)
    if value > MAX_ID:
        raise argparse.ArgumentTypeError(f"a user or group id is at most {MAX_ID}, got {text}")
    return value


def owner_spec(text: str) -> tuple[int, int]:
    uid_text, _, gid_text = text.partition(":")
    try:
        uid = _id(uid_text)
        gid = _id(gid_text) if gid_text else -1
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected UID or UID:GID (numbers), got {text!r}") from None
    return uid, gid


def access_of(args: argparse.Namespace) -> Access:
    if args.owner is not None:
        return Access(uid=args.owner[0], gid=args.owner[1])
    if args.group is not None:
        return Access(gid=args.group, mode=0o640)
    return Access()


def run(args: argparse.Namespace) -> int:
    from cryptography import x509

    from fedhh.rpc.credentials import public_key_path
    from fedhh.rpc.tls import make_dev_pki

    if not args.hosts.strip():
        raise ConfigError("--hosts needs at least one host name")
    hosts = [h.strip() for h in args.hosts.split(",")]
    for host in hosts:
        problem = options.host_problem(host)
        if problem:
            raise ConfigError(f"--hosts: {host!r} {problem}")
    if not args.secrets:
        given = [flag for flag, value in (("--device-tokens", args.device_tokens),
                                          ("--device-replicas", args.device_replicas))
                 if value is not None]
        if given:  # (they were ignored: no tokens are written without --secrets)
            raise ConfigError(f"{' and '.join(given)} {'go' if len(given) > 1 else 'goes'} "
                              "with --secrets DIR, where the device tokens are written")
    if args.device_tokens is None:
        args.device_tokens = DEVICE_TOKENS_DEFAULT
    if args.device_replicas is None:
        args.device_replicas = DEVICE_REPLICAS
    if args.secrets and args.device_replicas > args.device_tokens:
        # (found before anything is written, not after the certificates and secrets)
        raise ConfigError(f"--device-replicas {args.device_replicas} is more than the "
                          f"{args.device_tokens} --device-tokens: every replica needs some")
    access = access_of(args)
    # Every input is checked before the first write, so that a refusal changes nothing.
    check_access(access)
    check_folder("--out", args.out, "make a new CA, which the devices and services that "
                 "trust the earlier one's ca.pem refuse")
    for name in TLS_FILES:
        _check_rewritable(Path(args.out) / name)
    existing_tokens = (check_secrets(Path(args.secrets), args.device_tokens,
                                     args.device_replicas) if args.secrets else [])
    ca_path = Path(args.out) / "ca.pem"
    ca_before = ca_path.read_bytes() if ca_path.is_file() else None
    renewal = (Path(args.out) / "server.pem").is_file()
    files = make_dev_pki(args.out, hosts, days=args.days, new_ca=args.new_ca)
    kept_ca = ca_before == files.ca.read_bytes()  # (make_dev_pki checked the one it kept)
    access.apply(files.key)
    PUBLIC.apply(files.ca)
    PUBLIC.apply(files.cert)
    ca_until = x509.load_pem_x509_certificate(files.ca.read_bytes()).not_valid_after_utc
    until = x509.load_pem_x509_certificate(files.cert.read_bytes()).not_valid_after_utc
    # (before, ca.key went unnamed, and the --out folder beside ca.pem read as the thing to
    # hand out: whoever holds ca.key makes certificates every device trusts)
    print(f"{'kept ' if kept_ca else 'wrote'} {files.ca} (the CA, valid until "
          f"{ca_until:%Y-%m-%d}; hand out this file alone: {files.ca.with_name('ca.key')}, "
          "its signing key, stays with you)")
    print(f"wrote {files.cert} and {files.key} for {', '.join(hosts)}; valid until "
          f"{until:%Y-%m-%d} (rerun to renew)")
    if renewal:
        # The services read their certificate as they start; before, nothing said so, and a
        # stack "renewed" this way served the old certificate until it expired.
        print("the services read server.pem and server.key as they start: restart those that "
              "serve them to serve this one (compose: docker compose restart aggregator "
              "coordinator selector)")
    if until < dt.datetime.now(dt.UTC) + dt.timedelta(days=args.days) - dt.timedelta(hours=1):
        print(f"(the CA ends before --days {args.days}: the certificate ends with it; --new-ca "
              "makes a new CA, and every client then needs the new ca.pem)")
    if args.secrets:
        for path, made in write_secrets(Path(args.secrets), args.device_tokens,
                                        args.device_replicas, existing_tokens):
            access.apply(path)
            print(f"{'wrote' if made else 'kept '} {path}")
        public = public_key_path(Path(args.secrets) / SIGNING_KEY)
        PUBLIC.apply(public)
        print(f"wrote {public} (public)")
        shared = shared_folder(Path(args.out), Path(args.secrets))
        if shared and not args.kubernetes:
            print(f"fedhh certs: warning: --secrets {args.secrets} {shared}: the tokens, the "
                  "signing key and every device token lie beside ca.key and ca.pem. Hand out "
                  "ca.pem alone, never the folder, and give each service its own files one by "
                  "one (as compose's secrets and deploy/k8s's secretGenerator do); a --secrets "
                  "folder apart from --out keeps them apart (docs/networked.md)",
                  file=sys.stderr)
    if access == Access() and os.geteuid() != CONTAINER_UID and not args.kubernetes:
        # The compose stack's services run as uid 10001 and stopped at their first secret
        # ("cannot read the control token file ...: Permission denied"), restarting for ever.
        private = "server.key and the secrets are" if args.secrets else "server.key is"
        print(f"fedhh certs: warning: {private} mode 0600 for uid {os.geteuid()} alone; "
              f"for docker compose, whose services run as uid {CONTAINER_UID}, run this again "
              f"with --owner {CONTAINER_UID}:{CONTAINER_UID} (as root) or --group "
              f"{CONTAINER_UID}", file=sys.stderr)
    return 0


def check_folder(option: str, path: str | Path, lost: str) -> None:
    """An output folder of certs (--out, --secrets) that can be written, made only as the
    last folder of its path. Before, every missing folder was made, so a typo in a parent
    made a new tree, and keys and tokens in it, silently (``lost``: what that would make)."""
    options.check_output_dir(option, path)
    if not Path(path).exists():
        check_parent_folder(f"{option} {path}", path, LAST_FOLDER_MADE, lost)


def shared_folder(out: Path, secrets_dir: Path) -> str:
    """How the --secrets folder shares the --out folder ("is the --out folder", "is inside
    the --out folder", "holds the --out folder"), or "" when they are apart. Shared, the
    secrets go wherever the TLS folder goes: ca.pem is handed to every device and operator,
    and a --tls-dir of the whole folder would give every service every secret. It is allowed
    (the Kubernetes overlays build each Secret from files picked one by one in one folder),
    so it is said, not refused."""
    a, b = out.resolve(), secrets_dir.resolve()
    if a == b:
        return "is the --out folder"
    if a in b.parents:
        return "is inside the --out folder"
    if b in a.parents:
        return "holds the --out folder"
    return ""


def _check_rewritable(path: Path) -> None:
    """Refuse a file certs would replace that is not a regular file (a folder, a device)."""
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path} exists and is not a regular file; certs writes a file there")


def check_secrets(root: Path, device_tokens: int, replicas: int) -> list[str]:
    """Refuse, before anything is written, a ``root`` that ``write_secrets`` could not fill:
    not a folder, or an existing secret it would keep but the services refuse (a token they
    cannot use, a signing key that does not load, a tokens file not as certs writes it), or a
    file it rewrites that is not a regular file. Returns the existing device tokens."""
    from fedhh.rpc.credentials import load_signing_key, public_key_path, read_secret

    check_folder("--secrets", root, "make a new signing key and service tokens, which the "
                 "services given the earlier ones refuse")
    values = {}
    for name in TOKENS:
        path = root / f"{name}.token"
        if path.exists():
            try:  # what the services' own reading refuses at start
                values[name] = read_secret(path, "", f"existing {name} token")
            except ConfigError as error:
                raise ConfigError(f"{error}; certs keeps existing tokens: replace {path}, or "
                                  "remove it to have a new one written") from None
    for first, second in itertools.combinations(TOKENS, 2):  # the coordinator refuses these
        if second in values and values[second] == values.get(first):
            raise ConfigError(f"{root / f'{second}.token'} is the {first} token; certs keeps "
                              f"existing tokens: remove it to have a new {second} "
                              "token of its own written")
    key = root / SIGNING_KEY
    if key.exists():
        load_signing_key(key, f"the signing key {key}")
    for path in (public_key_path(key), *(replica_file(root, i, replicas)
                                         for i in range(replicas))):
        _check_rewritable(path)
    tokens_file = root / DEVICE_TOKENS
    tokens = read_device_tokens(tokens_file) if tokens_file.exists() else []
    if replicas > max(len(tokens), device_tokens):
        raise ConfigError(f"--device-replicas {replicas} is more than the "
                          f"{max(len(tokens), device_tokens)} device tokens: every replica "
                          "needs some")
    return tokens


def read_device_tokens(path: Path) -> list[str]:
    """The tokens of a device-tokens.txt as certs writes it: line u holds dataset user u's
    token, 64 hex digits, and nothing else. Any other line is refused, naming it, rather than
    guessed at: splitting a hand-edited file on whitespace shifted every later user's token
    and gave the replicas "tokens" like ``garbage``."""
    try:
        data = read_whole(path, LIST_FILE_BYTES, "tokens file")
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the newline that ends the last line
        lines.pop()
    tokens: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not DEVICE_TOKEN.fullmatch(line):
            if not line.isascii():
                found = "bytes that are not ASCII text"
            elif not line.strip():
                found = "an empty line"
            else:
                text = line.decode("ascii")
                found = repr(text if len(text) <= 24 else text[:24] + "...")
            raise ConfigError(f"{path}:{number}: expected one enrollment token per line (64 "
                              f"hex digits, as certs writes them), found {found}; fix the "
                              "line, or move the file away to have new tokens written")
        token = line.decode("ascii").lower()
        if token in first_line:
            raise ConfigError(f"{path}:{number}: the token of line {first_line[token]} again "
                              "(it enrolls one device, once: one of the two users never could)")
        first_line[token] = number
        tokens.append(token)
    return tokens


def write_secrets(root: Path, device_tokens: int, replicas: int = DEVICE_REPLICAS,
                  existing_tokens: list[str] | None = None) -> list[tuple[Path, bool]]:
    """The service tokens, the coordinator signing key and at least ``device_tokens``
    enrollment tokens under ``root``, each created only if missing (the key's public half is
    rewritten beside it; a shorter tokens file is extended), then each device replica's share
    of the tokens (``replica_tokens``); (path, created) per secret. ``existing_tokens`` is
    what ``check_secrets`` returned for the same arguments; without it, it is called here."""
    from fedhh.rpc.credentials import load_or_create_signing_key

    if existing_tokens is None:
        existing_tokens = check_secrets(root, device_tokens, replicas)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for name in TOKENS:
        path = root / f"{name}.token"
        if path.exists():
            written.append((path, False))
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(24) + "\n")
        written.append((path, True))
    key = root / SIGNING_KEY
    made = not key.exists()
    load_or_create_signing_key(key)
    written.append((key, made))
    written.append(_device_tokens(root / DEVICE_TOKENS, existing_tokens, device_tokens))
    written.extend(replica_tokens(root, replicas))
    return written


def replica_file(root: Path, index: int, replicas: int) -> Path:
    return root / f"device-tokens-{index}-of-{replicas}.txt"


def replica_tokens(root: Path, replicas: int) -> list[tuple[Path, bool]]:
    """Device replica i's tokens: ``USER TOKEN`` for every user u of device-tokens.txt with
    u mod ``replicas`` = i (the replicas' users are disjoint, cover every token, and differ in
    number by at most one, whatever the dataset's size). Rewritten from device-tokens.txt."""
    from fedhh.rpc.credentials import write_private

    tokens = read_device_tokens(root / DEVICE_TOKENS)
    if replicas > len(tokens):
        raise ConfigError(f"--device-replicas {replicas} is more than the {len(tokens)} device "
                          "tokens: every replica needs some")
    written = []
    for index in range(replicas):
        path = replica_file(root, index, replicas)
        write_private(path, "".join(f"{u} {tokens[u]}\n"
                                    for u in range(index, len(tokens), replicas)))
        written.append((path, True))
    return written


def _device_tokens(path: Path, have: list[str], count: int) -> tuple[Path, bool]:
    """``path`` holding ``have`` (its tokens now) extended to ``count`` tokens."""
    from fedhh.rpc.credentials import write_private

    if len(have) >= count:
        return path, False
    fresh = [secrets.token_bytes(32).hex() for _ in range(count - len(have))]
    write_private(path, "".join(f"{t}\n" for t in have + fresh))
    return path, True
