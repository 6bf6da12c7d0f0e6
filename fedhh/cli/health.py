"""`fedhh health`: ask a service's gRPC health endpoint; exit 0 when it is SERVING.

Used by the compose health checks: `fedhh health --address localhost:7000 --ca /tls/ca.pem`.
A service that cannot be reached is named with the cause where it is known: a certificate
not signed by --ca or not valid for the address (with the names it holds), a port that is
not the service's gRPC port, nothing listening, a name that does not resolve. With --wait
SECONDS it asks again until the service is SERVING (a script that starts a service and then
uses it: `fedhh health --address 127.0.0.1:7000 --ca tls/ca.pem --wait 60`).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from fedhh.cli import options


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("health", help="check a service's gRPC health",
                              description=__doc__)
    p.add_argument("--address", required=True, type=options.remote_address, help="HOST:PORT")
    # (--insecure as the services and devices spell plaintext; before, "unrecognized
    # arguments")
    transport = p.add_mutually_exclusive_group()
    transport.add_argument("--ca",
                           help="CA certificate for TLS (default: plaintext, loopback only)")
    transport.add_argument("--insecure", action="store_true",
                           help="plaintext, loopback only: what no --ca means, said outright")
    p.add_argument("--tls-name", help="expected name in the server certificate")
    p.add_argument("--service", default="", help="service name (default: the server overall)")
    p.add_argument("--timeout", type=timeout_s, default=5.0,
                   help=f"seconds to wait for each answer (default 5, at most "
                        f"{MAX_TIMEOUT_S:g}); a port nothing listens on answers at once")
    p.add_argument("--wait", type=timeout_s, metavar="SECONDS",
                   help="ask again until the service is SERVING or SECONDS have passed: for "
                        "a service still starting (nothing listening yet, NOT_SERVING, no "
                        "answer); a mistake waiting cannot mend (a certificate the CA did not "
                        "sign or that does not name the address, a port that is not gRPC, TLS "
                        "against plaintext) ends it at once (default: ask once)")
    p.set_defaults(handler=run)


# A day: gRPC turns a deadline it cannot represent (1e308 s) into one already past, and a
# healthy service then read as DEADLINE_EXCEEDED.
MAX_TIMEOUT_S = 86_400.0


def timeout_s(text: str) -> float:
    value = options.positive_float(text)
    if value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"at most {MAX_TIMEOUT_S:g} s, got {text!r}")
    return value


POLL_S = 0.25  # between two questions of --wait


def pause(seconds: float) -> None:
    time.sleep(seconds)


def run(args: argparse.Namespace) -> int:
    """Ask once, or with --wait until SERVING, a mistake that waiting cannot mend, or the
    deadline; print the last answer."""
    from fedhh.errors import ConfigError
    from fedhh.rpc import serving

    if not args.ca and not serving.is_loopback(args.address):
        raise ConfigError("--ca is required for a non-loopback address")
    deadline = time.monotonic() + (args.wait or 0.0)
    while True:
        code, line, final = ask(args)
        if code == 0 or final or time.monotonic() + POLL_S >= deadline:
            print(line)
            return code
        pause(POLL_S)


def ask(args: argparse.Namespace) -> tuple[int, str, bool]:
    """One question on a fresh channel (a channel that found nothing listening backs off for
    up to minutes before it dials again): (exit code, the line to print, whether waiting
    cannot change the answer)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from fedhh.cli.options import connection_problem
    from fedhh.rpc.serving import COMMAND_RETRIED, command_channel

    with command_channel(args.address, args.ca, tls_name=args.tls_name) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout)
        except grpc.RpcError as error:
            # The status alone ("UNAVAILABLE") told a wrong CA from a stopped service or a
            # port that is not gRPC by nothing: the cause and what to do follow it.
            why, final = "", error.code() not in COMMAND_RETRIED
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                why, final = connection_problem(error.details() or "", args.address, args.ca,
                                                args.tls_name)
            elif error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                why = (f"no answer within {args.timeout:g} s: a firewall that drops the "
                       "connection, an address that does not route here, or a service too "
                       "busy to answer (--timeout)")
            return 1, f"{args.address}: {error.code().name}" + (f" ({why})" if why else ""), \
                final
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    serving_now = reply.status == health_pb2.HealthCheckResponse.SERVING
    return (0 if serving_now else 1), f"{args.address}: {status}", False
