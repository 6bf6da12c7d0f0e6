"""`fedhh admin`: the operator's client of the coordinator's admin API.

    fedhh admin --coordinator HOST:PORT --ca tls/ca.pem --token-file secrets/admin.token \\
        start --run-id r1 --eps-agg 1 --rounds 4 --target-devices 1000 --min-devices 800
    fedhh admin ... status r1 | results r1 | wait r1 | cancel r1 | list

The admin token comes from --token-file or $FEDHH_ADMIN_TOKEN. Results print as JSON.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from fedhh.cli import options

SETTINGS = (
    ("eps-agg", options.positive_float), ("delta", options.open_unit),
    ("rounds", options.positive_int), ("dim-limit", options.positive_int),
    ("target-devices", options.positive_int), ("min-devices", options.positive_int),
    ("codec", str), ("max-bits", options.positive_int), ("selection", str),
    ("fp-ratio", options.positive_float), ("tail", str), ("segment-bits", options.positive_int),
    ("eps-local", options.positive_float), ("privacy-method", str),
    ("checkin-ms", options.positive_int), ("stage-ms", options.positive_int),
    ("advertise-ms", options.positive_int), ("share-keys-ms", options.positive_int),
    ("masked-input-ms", options.positive_int), ("unmask-ms", options.positive_int),
    ("expected-dropout", options.non_negative_float),
    ("corrupt-fraction", options.non_negative_float), ("max-attempts", options.positive_int),
    ("fp-ratio-of", str),
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("admin", help="operate the coordinator (start, inspect runs)",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coordinator", required=True, help="HOST:PORT")
    p.add_argument("--ca", help="CA certificate (default: plaintext, loopback only)")
    p.add_argument("--token-file", help="admin token file (default: $FEDHH_ADMIN_TOKEN)")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    start = actions.add_parser("start", help="start a run")
    start.add_argument("--run-id", default="")
    for name, kind in SETTINGS:
        start.add_argument(f"--{name}", type=kind)
    start.add_argument("--deny-list", metavar="PATH", help="file of items, one per line")
    for action in ("status", "results", "wait", "cancel"):
        sub = actions.add_parser(action)
        sub.add_argument("run_id")
    actions.add_parser("list")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from fedhh.errors import ConfigError
    from fedhh.rpc import serving
    from fedhh.rpc.admin_client import AdminClient
    from fedhh.rpc.credentials import read_secret
    from fedhh.v1 import coordinator_pb2 as pb

    if not args.ca and not serving.is_loopback(args.coordinator):
        raise ConfigError("--ca is required for a non-loopback coordinator")
    token = read_secret(args.token_file, "FEDHH_ADMIN_TOKEN", "admin token")
    with AdminClient(args.coordinator, token, args.ca) as client:
        if args.action == "start":
            config = pb.RunConfig()
            for name, _ in SETTINGS:
                value = getattr(args, name.replace("-", "_"))
                if value is not None:
                    setattr(config, name.replace("-", "_"), value)
            if args.deny_list:
                from fedhh.data.wordlists import load_item_list

                config.deny_list.extend(load_item_list(args.deny_list))
            reply: Any = client.start_run(config, args.run_id)
        elif args.action == "list":
            reply = pb.ListRunsResponse(runs=client.runs())
        elif args.action == "status":
            reply = client.run(args.run_id)
        elif args.action == "results":
            reply = client.results(args.run_id)
        elif args.action == "wait":
            reply = client.wait(args.run_id, 24 * 3600)
        else:
            reply = client.cancel(args.run_id)
    print(json.dumps(MessageToDict(reply), indent=2))
    return 0
