"""`fedhh certs`: development TLS material and secrets for a local or compose deployment.

Writes a development CA (ca.pem, ca.key) and one server certificate (server.pem, server.key)
valid for the given host names, and with --tokens the three service secrets
(control.token, enrollment.token, admin.token). For production use your own PKI.
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path
from typing import Any

DEFAULT_HOSTS = "localhost,127.0.0.1,coordinator,aggregator"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("certs", help="make development TLS certificates and secrets",
                              description=__doc__)
    p.add_argument("--out", required=True, help="directory to write into")
    p.add_argument("--hosts", default=DEFAULT_HOSTS,
                   help=f"comma-separated names and addresses (default {DEFAULT_HOSTS})")
    p.add_argument("--tokens", metavar="DIR", help="also write the three service tokens here")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fedhh.errors import ConfigError
    from fedhh.rpc.tls import make_dev_pki

    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if not hosts:
        raise ConfigError("--hosts needs at least one host name")
    files = make_dev_pki(args.out, hosts)
    print(f"wrote {files.ca}, {files.cert} and {files.key} for {', '.join(hosts)}")
    if args.tokens:
        root = Path(args.tokens)
        root.mkdir(parents=True, exist_ok=True)
        for name in ("control", "enrollment", "admin"):
            path = root / f"{name}.token"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(24) + "\n")
            print(f"wrote {path}")
    return 0
